"""Two processes share one PostgreSQL-backed optuna study: `rosetta compile --optimize --storage
postgresql://...` plus a `rosetta optimize --worker` — the race's units (a candidate answering a
rung's rows) are split between them, none is answered twice, and the compile process writes the
artifact."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import optuna
import pytest
from pg_server import PostgresServer
from scripted_model import write_toy_project

TESTS = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def postgres() -> str:
    with PostgresServer() as server:
        yield server.url


def test_two_workers_share_one_study_without_duplicating_trials(tmp_path: Path, postgres: str) -> None:
    root = tmp_path / "toy"
    root.mkdir()
    write_toy_project(root, dev=20)
    log = tmp_path / "calls.log"
    env = {**os.environ, "PYTHONPATH": str(TESTS), "SCRIPTED_LOG": str(log), "SCRIPTED_DELAY": "0.01"}
    # --fixed-demos: nearest demos would score the toy model perfectly and end the study at trial 2
    shared = ["--model", "scripted/toy", "--storage", postgres, "--trials", "14", "--proposer", "none", "--fixed-demos"]
    main = subprocess.Popen([sys.executable, "-m", "scripted_model", "compile", "signatures/toy-sorter.md",
                             "--optimize", *shared], cwd=root, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    worker = subprocess.Popen([sys.executable, "-m", "scripted_model", "optimize", "toy-sorter", "--worker",
                               *shared], cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    main_out, main_err = main.communicate(timeout=300)
    worker_out, worker_err = worker.communicate(timeout=300)
    assert main.returncode == 0, main_err
    assert worker.returncode == 0, worker_err
    assert "worker done" in worker_out and "optimized toy-sorter" in main_out
    assert (root / "compiled/toy-sorter/scripted/toy.yaml").exists()

    storage = optuna.storages.RDBStorage(postgres)
    (summary,) = optuna.get_all_study_summaries(storage)
    trials = optuna.load_study(study_name=summary.study_name, storage=storage).get_trials()
    units = [(t.user_attrs["candidate"], t.user_attrs["rung"]) for t in trials if t.state.name == "COMPLETE"]
    # every candidate raced: the two seeded prompts (no nearest demos) on all of dev first, the rest in rung 0
    assert len({candidate for candidate, rung in units if rung in (-1, 0)}) == 14
    assert len(units) == len(set(units))  # no unit was answered twice
    assert len({t.user_attrs["pid"] for t in trials if t.state.name == "COMPLETE"}) == 2  # both processes answered
    asked = Counter(line.split()[2] for line in log.read_text().splitlines())
    assert max(asked.values()) == 1  # and no model call was made twice
    assert sum(1 for t in trials if t.user_attrs.get("default") and t.user_attrs.get("phase") == "prior") == 1
