"""Issue 52: the evaluation cache (``.rosetta/eval-cache.sqlite``) earns its trust. Entries planted
in it, copied from another project, written unsigned by an older rosetta, or signed but holding
impossible values (negative calls or costs, verdicts outside [0, 1]) are asked again: the search
scores, spends and writes exactly what an uncached search does. A cache path that is not a plain
file is never opened; the search runs uncached."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import sqlite3
import stat
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
import scripted_model
from conftest import REPO
from scripted_model import GOOD_INSTRUCTION, write_toy_project
from test_optimize import ARTIFACT, run, scripted  # noqa: F401  (scripted: the autouse fixture registering it)

from rosetta.optimize.cache import Answer, EvalCache
from rosetta.signing import project_secret, secret_path, sign

CACHE = Path(".rosetta/eval-cache.sqlite")
PLANTED = "PLANTED-BY-A-STRANGER"
JUDGED = {"trials": 4, "max_calls": 150, "baseline_test": True}  # the proposer, bootstrap and judge all ask
WARNINGS = "rosetta.optimize"


@pytest.fixture(autouse=True)
def user_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's cache folder, where project secrets live: outside every test project."""
    folder = tmp_path_factory.mktemp("user-cache")
    monkeypatch.setenv("ROSETTA_CACHE_DIR", str(folder))
    return folder


def toy_project(tmp_path: Path, name: str = "toy", *, judged: bool = False) -> Path:
    root = tmp_path / name
    root.mkdir()
    write_toy_project(root)
    if judged:  # a judge metric: verdicts are cached, and (no longer label-only) bootstrap demos are searched
        definition = root / "signatures/toy-sorter.md"
        definition.write_text(definition.read_text().replace(
            "evaluation:\n  metric: exact\n",
            "evaluation:\n  metric: judge\n  judge: scripted/judge\n"
            "  rubric: [The label matches the reference, The answer is polite]\n"))
        shutil.copy(REPO / "signatures/rubric-reviewer.md", root / "signatures/rubric-reviewer.md")
    return root


def searched(root: Path, **settings: object) -> tuple[object, int, bytes]:
    """The outcome of a search on ``root``, the model calls it really sent, and its artifact."""
    before = scripted_model.calls
    outcome = run(root, **settings).outcome
    return outcome, scripted_model.calls - before, (root / ARTIFACT).read_bytes()


def search_again(root: Path, **settings: object) -> tuple[object, int, bytes]:
    """The same search from scratch (no study, no artifact), with whatever the cache holds."""
    shutil.rmtree(root / ".rosetta/studies")
    (root / ARTIFACT).unlink()
    return searched(root, **settings)


def assert_same_search(first: tuple[object, int, bytes], again: tuple[object, int, bytes]) -> None:
    """``again`` scored, spent and wrote exactly what the uncached ``first`` did."""
    (one, paid_one, artifact_one), (two, paid_two, artifact_two) = first, again
    assert (two.dev_score, two.test_score, two.baseline_dev, two.baseline_test) == \
        (one.dev_score, one.test_score, one.baseline_dev, one.baseline_test)
    assert (two.calls, two.test_calls, two.phases) == (one.calls, one.test_calls, one.phases)
    assert paid_two == paid_one  # every poisoned entry was asked again
    assert artifact_two == artifact_one and PLANTED.encode() not in artifact_two


def kind_of(entry: dict) -> str:
    if isinstance(entry["data"], (int, float)) and entry["raw"] == "":
        return "verdict"
    if isinstance(entry["data"], str) and entry["data"] == entry["raw"]:
        return "proposal"
    return "answer"


def rewrite(root: Path, plant: Callable[[str, dict, int], dict],
            digest: Callable[[str, str, int, list[tuple[str, str, str]]], str | None]) -> Counter:
    """Rewrite every entry of ``root``'s cache: its value by ``plant(kind, entry, n)``, its digest by
    ``digest(key, value, n, rows)``; how many entries of each kind there were."""
    kinds: Counter = Counter()
    with sqlite3.connect(root / CACHE) as db:
        rows = db.execute("SELECT key, value, digest FROM answers ORDER BY key").fetchall()
        for n, (key, value, _) in enumerate(rows):
            entry = json.loads(value)
            kinds[kind_of(entry)] += 1
            value = json.dumps(plant(kind_of(entry), entry, n))
            db.execute("UPDATE answers SET value = ?, digest = ? WHERE key = ?",
                       (value, digest(key, value, n, rows), key))
    db.close()
    return kinds


def every_entry_verifies(root: Path) -> bool:
    secret = project_secret(root)
    with sqlite3.connect(root / CACHE) as db:
        rows = db.execute("SELECT key, value, digest FROM answers").fetchall()
    db.close()
    return bool(rows) and all(sign(secret, key, value) == digest for key, value, digest in rows)


def planted(kind: str, entry: dict, n: int) -> dict:
    """What a stranger would plant: perfect answers and verdicts at no cost, a winning instruction."""
    if kind == "verdict":
        return {"data": 1.0, "raw": "", "valid": True, "calls": 0, "cost": 0.0}
    if kind == "proposal":
        text = json.dumps({"instruction": f"{PLANTED} {GOOD_INSTRUCTION}"})
        return {"data": text, "raw": text, "valid": True, "calls": 0, "cost": 0.0}
    return {"data": {"label": "alpha", "note": PLANTED}, "raw": PLANTED, "valid": True, "calls": 0, "cost": 0.0}


def unsigned(key: str, value: str, n: int, rows: list[tuple[str, str, str]]) -> str | None:
    """Digests made without this project's secret: none (an older rosetta), another project's, a
    plain hash, and this project's own digest of another entry (moved under this key)."""
    other_digest = rows[(n + 1) % len(rows)][2]
    return [None, sign(b"another project's secret", key, value), hashlib.sha256(value.encode()).hexdigest(),
            other_digest][n % 4]


def impossible(kind: str, entry: dict, n: int) -> dict:
    """Entries this project could have signed, holding values no answer can have."""
    if kind == "verdict":
        return {**entry, "data": [1e9, -0.5, float("nan"), 1.5, "1.0"][n % 5]}
    if kind == "proposal":
        text = json.dumps({"instruction": f"{PLANTED} {GOOD_INSTRUCTION}"})
        return {**entry, "data": text, "raw": text, **[{"calls": -1000}, {"cost": -1e9}][n % 2]}
    return {**entry, "data": {"label": "alpha"}, "valid": True,
            **[{"calls": -5}, {"cost": -1.0}, {"cost": float("nan")}, {"calls": 1.5}, {"calls": True},
               {"odds": {"alpha": 7.0}}][n % 6]}


def test_planted_entries_neither_score_nor_spend(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = toy_project(tmp_path, judged=True)
    first = searched(root, **JUDGED)
    kinds = rewrite(root, planted, unsigned)
    assert kinds["proposal"] == 3 and kinds["verdict"] > 0 and kinds["answer"] > 0
    with caplog.at_level(logging.WARNING, logger=WARNINGS):
        again = search_again(root, **JUDGED)
    assert_same_search(first, again)
    warned = [r for r in caplog.records if "did not sign" in r.getMessage()]
    assert len(warned) == 1  # one warning for the cache, not one per entry
    assert every_entry_verifies(root)  # the fresh answers replaced them


def test_signed_entries_with_impossible_values_are_asked_again(tmp_path: Path,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    root = toy_project(tmp_path, judged=True)
    first = searched(root, **JUDGED)
    secret = project_secret(root)
    rewrite(root, impossible, lambda key, value, n, rows: sign(secret, key, value))
    with caplog.at_level(logging.WARNING, logger=WARNINGS):
        again = search_again(root, **JUDGED)
    assert_same_search(first, again)
    assert sum("impossible values" in r.getMessage() for r in caplog.records) == 1
    assert every_entry_verifies(root)


def test_max_calls_holds_against_entries_that_claim_to_have_cost_nothing(tmp_path: Path) -> None:
    root = toy_project(tmp_path)
    settings = {"max_calls": 60, "trials": None, "proposer": None}  # the budget, not the trials, ends it
    first = searched(root, **settings)
    assert first[0].calls <= 60
    secret = project_secret(root)
    rewrite(root, lambda kind, entry, n: {**entry, "calls": -100, "cost": -1.0},
            lambda key, value, n, rows: sign(secret, key, value) if n % 2 else None)
    assert_same_search(first, search_again(root, **settings))


def fifo(path: Path, outside: Path) -> None:
    os.mkfifo(path)


def link_to_a_file(path: Path, outside: Path) -> None:
    (outside / "victim.sqlite").write_bytes(b"someone else's file")
    path.symlink_to(outside / "victim.sqlite")


def link_to_dev_zero(path: Path, outside: Path) -> None:
    path.symlink_to("/dev/zero")


def link_to_a_cache_elsewhere(path: Path, outside: Path) -> None:
    with sqlite3.connect(outside / "eval-cache.sqlite") as db:
        db.execute("CREATE TABLE answers (key TEXT PRIMARY KEY, value TEXT NOT NULL, digest TEXT)")
    db.close()
    path.symlink_to(outside / "eval-cache.sqlite")


def linked_write_ahead_log(path: Path, outside: Path) -> None:
    (outside / "victim").write_bytes(b"someone else's file")
    path.with_name(path.name + "-wal").symlink_to(outside / "victim")


@pytest.mark.parametrize("plant", [fifo, link_to_a_file, link_to_dev_zero, link_to_a_cache_elsewhere,
                                   linked_write_ahead_log], ids=lambda plant: plant.__name__)
def test_a_cache_path_that_is_not_a_plain_file_leaves_the_search_uncached(
        tmp_path: Path, plant: Callable[[Path, Path], None], caplog: pytest.LogCaptureFixture) -> None:
    settings = {"trials": 3, "proposer": None}
    first = searched(toy_project(tmp_path, "clean"), **settings)
    root, outside = toy_project(tmp_path), tmp_path / "outside"
    outside.mkdir()
    (root / ".rosetta").mkdir()
    plant(root / CACHE, outside)
    before = {path: path.read_bytes() for path in outside.rglob("*") if path.is_file()}
    with caplog.at_level(logging.WARNING, logger=WARNINGS):
        again = searched(root, **settings)
    assert_same_search(first, again)
    assert "evaluation cache not used" in caplog.text and str(root / ".rosetta") in caplog.text
    assert {path: path.read_bytes() for path in outside.rglob("*") if path.is_file()} == before  # nothing followed


# The cache itself, without a search around it


def test_the_secret_lives_outside_the_project_created_once_for_the_owner_only(tmp_path: Path,
                                                                              user_cache: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    cache = EvalCache(root / CACHE)
    cache.put("k", Answer({"label": "alpha"}, "x", True, 1, 0.0))
    key = secret_path(root)
    assert key.parent == user_cache / "project-keys" and key.name == hashlib.sha256(str(root).encode()).hexdigest() \
        + ".key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    text = key.read_text()
    assert EvalCache(root / CACHE).get("k") == Answer({"label": "alpha"}, "x", True, 1, 0.0)  # read back, not remade
    assert key.read_text() == text and not any(root.rglob("*.key"))


def test_a_cache_folder_the_project_names_never_holds_the_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The key lives in the user's cache folder, which no project setting names: a project's own
    ``cache_dir`` (confined to the project) holds downloads, never the key that signs its cache."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "pyproject.toml").write_text("[tool.rosetta]\ncache_dir = 'shipped'\n")
    monkeypatch.delenv("ROSETTA_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user"))
    cache = EvalCache(root / CACHE)
    cache.put("k", Answer(1, "1", True, 1, 0.0))
    assert cache.path is not None and EvalCache(root / CACHE).get("k") == Answer(1, "1", True, 1, 0.0)
    assert not (root / "shipped").exists() and list((tmp_path / "user" / "rosetta" / "project-keys").iterdir())


def test_a_user_cache_folder_inside_the_project_is_not_trusted_with_the_secret(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "project"
    root.mkdir()
    monkeypatch.setenv("ROSETTA_CACHE_DIR", str(root / "inside"))
    with caplog.at_level(logging.WARNING, logger=WARNINGS):
        cache = EvalCache(root / CACHE)
    assert cache.path is None and "inside the project" in caplog.text and "ROSETTA_CACHE_DIR" in caplog.text
    cache.put("k", Answer(1, "1", True, 1, 0.0))
    assert cache.get("k") == Answer(1, "1", True, 1, 0.0)  # still a cache for this run


def test_a_cache_copied_from_another_project_is_a_miss_until_overwritten(tmp_path: Path,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    source = EvalCache(one / CACHE)
    for n in range(5):
        source.put(f"k{n}", Answer({"label": "alpha"}, "x", True, 1, 0.001))
    (two / ".rosetta").mkdir(parents=True)
    original, copy = sqlite3.connect(one / CACHE), sqlite3.connect(two / CACHE)
    original.backup(copy)  # the whole database, what its write-ahead log holds included
    original.close(), copy.close()
    with caplog.at_level(logging.WARNING, logger=WARNINGS):
        copied = EvalCache(two / CACHE)
        assert [copied.get(f"k{n}") for n in range(5)] == [None] * 5 and copied.misses == 5
    assert sum("did not sign" in r.getMessage() for r in caplog.records) == 1
    copied.put("k0", Answer({"label": "beta"}, "y", True, 2, 0.0))
    assert EvalCache(two / CACHE).get("k0") == Answer({"label": "beta"}, "y", True, 2, 0.0)
    assert EvalCache(one / CACHE).get("k1") == Answer({"label": "alpha"}, "x", True, 1, 0.001)  # its own still hold


def test_a_cache_an_older_rosetta_wrote_is_kept_and_its_entries_asked_again(tmp_path: Path,
                                                                           caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / ".rosetta").mkdir()
    with sqlite3.connect(tmp_path / CACHE) as db:
        db.execute("CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.execute("INSERT INTO answers VALUES ('k', ?)", (json.dumps(vars(Answer(1.0, "", True, 0, 0.0))),))
    db.close()
    with caplog.at_level(logging.WARNING, logger=WARNINGS):
        cache = EvalCache(tmp_path / CACHE)
        assert cache.path is not None and cache.get("k", score=True) is None
    assert "older rosetta" in caplog.text
    cache.put("k", Answer(0.5, "", True, 1, 0.0))
    assert EvalCache(tmp_path / CACHE).get("k", score=True) == Answer(0.5, "", True, 1, 0.0)


@pytest.mark.parametrize("entry", [
    {"data": 1e9, "raw": "", "valid": True, "calls": 1, "cost": 0.0},
    {"data": -0.1, "raw": "", "valid": True, "calls": 1, "cost": 0.0},
    {"data": float("inf"), "raw": "", "valid": True, "calls": 1, "cost": 0.0},
    {"data": True, "raw": "", "valid": True, "calls": 1, "cost": 0.0},
    {"data": 0.5, "raw": "", "valid": True, "calls": -1, "cost": 0.0},
    {"data": 0.5, "raw": "", "valid": True, "calls": 1, "cost": -0.01},
    {"data": 0.5, "raw": "", "valid": True, "calls": 1, "cost": float("inf")},
    {"data": 0.5, "raw": "", "valid": "yes", "calls": 1, "cost": 0.0},
    {"data": 0.5, "raw": "", "valid": True, "calls": 1, "cost": 0.0, "extra": "field"},
    [0.5, "", True, 1, 0.0],
], ids=repr)
def test_a_signed_verdict_with_an_impossible_value_is_a_miss(tmp_path: Path, entry: object) -> None:
    cache = EvalCache(tmp_path / CACHE)
    secret = project_secret(tmp_path)
    value = json.dumps(entry)
    with sqlite3.connect(tmp_path / CACHE) as db:
        db.execute("INSERT INTO answers VALUES ('k', ?, ?)", (value, sign(secret, "k", value)))
    db.close()
    assert cache.get("k", score=True) is None
    fine = json.dumps({"data": 0.5, "raw": "", "valid": True, "calls": 1, "cost": 0.0})
    with sqlite3.connect(tmp_path / CACHE) as db:  # the same row with possible values is a hit
        db.execute("UPDATE answers SET value = ?, digest = ?", (fine, sign(secret, "k", fine)))
    db.close()
    assert cache.get("k", score=True) == Answer(0.5, "", True, 1, 0.0)


def test_a_cached_verdict_outside_0_1_is_judged_again(tmp_path: Path) -> None:
    from rosetta.optimize.evaluation import Budget, Evaluator
    from rosetta.optimize.metrics import Metric
    from rosetta.datasets import Example

    graded: list[object] = []
    judge = Metric("judge", lambda p, e: graded.append(p) or 0.25, needs_model=True)
    answer, example = Answer({"label": "alpha"}, "", True, 1, 0.0), Example("e1", {"text": "x"}, {"label": "beta"})
    assert Evaluator(None, judge, EvalCache(tmp_path / CACHE), Budget()).score(answer, example) == 0.25
    secret = project_secret(tmp_path)
    with sqlite3.connect(tmp_path / CACHE) as db:
        (key, value), = db.execute("SELECT key, value FROM answers").fetchall()
        poisoned = json.dumps({**json.loads(value), "data": 1e9, "calls": 0})
        db.execute("UPDATE answers SET value = ?, digest = ?", (poisoned, sign(secret, key, poisoned)))
    db.close()
    budget = Budget()
    assert Evaluator(None, judge, EvalCache(tmp_path / CACHE), budget).score(answer, example) == 0.25
    assert len(graded) == 2 and (budget.calls, budget.paid_calls) == (1, 1)


@pytest.mark.parametrize("sql", [
    "CREATE TRIGGER spin AFTER INSERT ON answers BEGIN SELECT 1; END",
    "CREATE VIEW peek AS SELECT * FROM answers",
    "CREATE INDEX slow ON answers (length(value))",
])
def test_a_database_holding_what_rosetta_never_makes_is_not_used(tmp_path: Path, sql: str,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / ".rosetta").mkdir()
    with sqlite3.connect(tmp_path / CACHE) as db:
        db.execute("CREATE TABLE answers (key TEXT PRIMARY KEY, value TEXT NOT NULL, digest TEXT)")
        db.execute(sql)
    db.close()
    with caplog.at_level(logging.WARNING, logger=WARNINGS):
        cache = EvalCache(tmp_path / CACHE)
    assert cache.path is None and "which rosetta never makes" in caplog.text and "delete it" in caplog.text


def test_a_file_that_is_no_database_is_not_used(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / ".rosetta").mkdir()
    (tmp_path / CACHE).write_bytes(b"not a database at all" * 100)
    with caplog.at_level(logging.WARNING, logger=WARNINGS):
        cache = EvalCache(tmp_path / CACHE)
    assert cache.path is None and "evaluation cache not used" in caplog.text and "delete it" in caplog.text
    cache.put("k", Answer(1, "1", True, 1, 0.0))
    assert cache.get("k") == Answer(1, "1", True, 1, 0.0)


def test_a_linked_state_folder_is_not_followed(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    root = tmp_path / "project"
    root.mkdir()
    (root / ".rosetta").symlink_to(elsewhere, target_is_directory=True)
    with caplog.at_level(logging.WARNING, logger=WARNINGS):
        cache = EvalCache(root / CACHE)
    assert cache.path is None and "is a symlink" in caplog.text and not any(elsewhere.iterdir())
