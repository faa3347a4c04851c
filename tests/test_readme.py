"""The ``rosetta …`` commands of the README and the docs site's guide (tests/documented.py: the
README, then the guide's pages in nav order), run in order against a temporary project on the
embedded model: its bundled agents, a small slice of one dataset, and the guide's own model
declarations ("Your own models", a deployment's ``base_model``) in its pyproject.toml.

They run in this process (Typer's runner, the project as the working directory), as the CLI's own
entry point runs them: forty fresh interpreters spent three minutes importing litellm and loading
the model again (``./dev main``, CI's last step, runs the installed ``rosetta`` script). How long a
command takes is the benchmarks' business (bench/verify_fast.py); one that hangs dumps every
thread's stack and ends the run after five minutes.

Every command in a ``bash`` block runs. Most run as written; :data:`ADAPTED` lists the ones that
need a change to run here, and why (a long run made short, a placeholder filled in, a cloud key
there is none of); a command the README adds without a rule here runs as written. None may end in
a traceback, and each must end with the exit code the README implies.
"""

from __future__ import annotations

import faulthandler
import json
import os
import re
import shutil
import time
import traceback
from pathlib import Path
import pytest
import typer
from typer.testing import CliRunner

from conftest import REPO
from documented import guide_text

LOCAL = "local/gemma-3-270m"

ADAPTED: dict[str, tuple[str, str]] = {
    # README command → (command run here, why)
    "rosetta compile signatures/vuln-triage.md --model local/gemma-3-270m --optimize --max-calls 150": (
        "rosetta compile signatures/vuln-triage.md --model local/gemma-3-270m --optimize --max-calls 6",
        "a real search on a 4/3/2-row slice: a small --max-calls"),
    "rosetta optimize vuln-triage --model gpt-4o --storage postgresql://... --worker": (
        "rosetta optimize vuln-triage --model gpt-4o --storage sqlite:///studies.db --dry-run",
        "a worker joins a study another process runs on PostgreSQL: here the same options, estimated"),
    "rosetta verify signatures/leak-detector.md --model local/gemma-3-270m --limit 5": (
        "rosetta verify signatures/leak-detector.md --model local/gemma-3-270m --limit 1 --fast",
        "the judge on the embedded model takes minutes per answer: one example, rule checks"),
    "rosetta verify signatures/ --model local/gemma-3-270m --fast": (
        "rosetta verify signatures/question-type.md signatures/vuln-triage.md --model local/gemma-3-270m --fast",
        "every bundled agent takes over a minute: two of them here (bench/verify_fast.py times them all)"),
    "rosetta evaluate question-type --cross local/gemma-3-270m --cross local/smollm2-135m-instruct": (
        "rosetta evaluate question-type --cross local/gemma-3-270m --cross local/smollm2-135m-instruct "
        "--dataset slices/question-type",
        "six answers a row, ~5 s each on two cores: one row of each split (make_project), not the test split's 100"),
}
"""README commands run differently here, with the reason."""

EXIT_CODES = {
    "rosetta validate signatures/ --strict": {0, 1},  # warnings are errors under --strict
    "rosetta compile --check": {0, 1},  # artifacts for the cloud defaults are checked, some may be missing
    "rosetta experiment promote vuln-triage --model local/gemma-3-270m": {1},  # no outcomes yet: declined
    # a 270M base model fails some criteria for some agents (a finding, not a crash)
    "rosetta verify signatures/ --model local/gemma-3-270m --fast": {0, 1},
    "rosetta verify signatures/ --model anthropic/claude-sonnet-5-5 --model openai/gpt-4o --model "
    "ollama/llama3.1 --judge openai/gpt-4o --report verify.html --json verify.json": {1},  # no keys here
}
"""Exit codes other than 0 that a command's README context implies in this offline project."""

def readme_commands() -> list[str]:
    """Every ``rosetta`` command of the README's and the guide's bash blocks, continuation lines
    joined, comments dropped."""
    text = guide_text()
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s+#.*$", "", line.strip())
            if line.startswith("rosetta "):
                commands.append(" ".join(line.split()))
    return commands


def make_project(root: Path) -> Path:
    """The bundled agents and their data (vuln-triage's cut to a small slice, and one row of each of
    question-type's splits in slices/), a bug report file, and the README's declaration of a
    self-hosted model."""
    shutil.copytree(REPO / "signatures", root / "signatures")
    shutil.copytree(REPO / "datasets", root / "datasets")
    for split, rows in (("train", 4), ("dev", 3), ("test", 2)):
        lines = (REPO / "datasets" / "vuln-triage" / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()
        target = root / "datasets" / "vuln-triage" / f"{split}.jsonl"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("\n".join(lines[:rows]) + "\n", encoding="utf-8")
    for split in ("train", "dev", "test"):  # the cross-model matrix's one-row dataset (ADAPTED)
        first = (REPO / "datasets" / "question-type" / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()[0]
        target = root / "slices" / "question-type" / f"{split}.jsonl"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(first + "\n", encoding="utf-8")
    (root / "bug.txt").write_text("SQL injection in the login form lets an unauthenticated attacker dump the users "
                                  "table; a PoC request is attached.\n", encoding="utf-8")
    declarations = "\n".join(block for block in re.findall(r"```toml\n(.*?)```", guide_text(), re.S)
                             if "[tool.rosetta.models." in block)
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n\n" + declarations, encoding="utf-8")
    return root


def test_every_readme_command_runs_as_documented(tmp_path: Path, local_model: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from rosetta.cli import app

    root = make_project(tmp_path / "project")
    monkeypatch.chdir(root)
    # one command at a time, as a user runs them: every CPU is the command's, whatever else the
    # machine runs (the default would size itself to what other work leaves free)
    monkeypatch.setenv("ROSETTA_LOCAL_THREADS", str(os.cpu_count() or 1))
    runner = CliRunner()
    commands = readme_commands()
    assert len(commands) > 20 and all(command in commands for command in ADAPTED), "ADAPTED names a gone command"
    failures, compiled_local = [], 0
    for command in commands:
        run = ADAPTED.get(command, (command, ""))[0]
        if run == "rosetta compile signatures/vuln-triage.md --model local/gemma-3-270m":  # the rollout walk-through
            compiled_local += 1
            if compiled_local == 1:  # version A: a plain render in place of the search's artifact made above
                run += " --force"
            else:  # the README edits the definition between its two compiles
                definition = root / "signatures" / "vuln-triage.md"
                definition.write_text(definition.read_text() + "\nAlways name the affected component.\n")
        if "--treatment 9a8b7c6d5e4f --control 3f5c1a2b9d0e" in run:  # the README's placeholder ids
            new, old = _versions(runner, app)
            run = run.replace("9a8b7c6d5e4f", new[:12]).replace("3f5c1a2b9d0e", old[:12])
        started = time.monotonic()
        faulthandler.dump_traceback_later(300, exit=True)  # a hang fails the run instead of stalling CI
        try:
            done = runner.invoke(app, run.split()[1:], catch_exceptions=True)
        finally:
            faulthandler.cancel_dump_traceback_later()
        seconds = time.monotonic() - started
        crashed = done.exception if not isinstance(done.exception, (SystemExit, type(None))) else None
        output = done.output + ("".join(traceback.format_exception(crashed)) if crashed else "")
        wanted = EXIT_CODES.get(command, {0})
        if "Traceback" in output or done.exit_code not in wanted:
            failures.append(f"{run}\n  exit {done.exit_code} (wanted {sorted(wanted)}) in {seconds:.0f}s\n"
                            + "\n".join("  | " + line for line in output.strip().splitlines()[-8:]))
    assert not failures, "\n".join(failures)
    assert (root / "trials.html").is_file() and (root / "rosetta.sarif").is_file()


def _versions(runner: CliRunner, app: typer.Typer) -> tuple[str, str]:
    """The newest and the previous version of vuln-triage on the embedded model."""
    listing = runner.invoke(app, ["versions", "vuln-triage", "--model", LOCAL, "-f", "json"], catch_exceptions=False)
    versions = json.loads(listing.stdout)["versions"]
    current = next(v["id"] for v in versions if v["current"])
    return current, next(v["id"] for v in versions if v["id"] != current and v["optimizer"] is None)
