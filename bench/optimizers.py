"""Benchmark: prompt optimizers on the embedded local model, same agent, data and model, one run.

Rows (each scored on the agent's test split; "calls" are the model calls the method spent
choosing its prompt, the test pass excluded; wall time includes the test pass):

- unoptimized render — rosetta's per-model render of the definition, no search;
- fixed k-shot — the first k train rows as demos (k = the definition's count_range max);
- random search — label-balanced random demo sets (labels taken in turn; plain samples where the
  output has no label), each scored on all of dev, as many as 400 calls allow (8 × 50 dev rows,
  10 × 40), the best one on dev;
- DSPy LabeledFewShot, BootstrapFewShotWithRandomSearch and MIPROv2 (auto="light") on the agent's
  ``to_dspy()`` signature, run and scored by DSPy in its own prompt formats (parsed = answers
  DSPy could parse); a crash is reported as such;
- rosetta — ``compile --optimize`` with ``--max-calls 150``.

Everything rosetta scores goes through the runtime (``Agent.run_prompt``) with a cold evaluation
cache, so no row is helped by another's answers (rosetta's search chooses on dev only; its winner's
test answers are paid for here, through that same path, after the choice).

A full run takes hours on a small CPU, so each finished row is kept in ``--results`` (JSONL, keyed by
the agent, data hash and settings). Run the same command again after an interruption and the finished
rows are reused — the table marks them with the time they were measured — while the rest run now.
A DSPy row (hours each) also survives interruption inside itself: DSPy's own response cache and the
row's wall time so far are kept under ``.rosetta/bench/``, so a rerun replays the answers it already
paid for (still counted as calls) and the row's wall time is the sum over its attempts.
``--fresh`` measures everything again.

    python bench/optimizers.py [--agent question-type ...] [--max-calls 150] [--skip-dspy] [--rows KEYS] [--fresh]

With no ``--agent``, the four agents of the measurements in bench/README.md, one table each.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL = "local/gemma-3-270m"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--agent", action="append", default=None,
                        help=f"agent to measure (repeatable; default: {', '.join(AGENTS)})")
    parser.add_argument("--max-calls", type=int, default=150)
    parser.add_argument("--trials", type=int, default=None, help="rosetta's candidates (default: as the budget allows)")
    parser.add_argument("--random-calls", type=int, default=400, help="the random search's budget, in dev answers")
    parser.add_argument("--skip-dspy", action="store_true", help="only the rosetta rows")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit", type=int, default=None,
                        help="smoke run: use only the first N rows of each split (not a measurement)")
    parser.add_argument("--results", type=Path, default=None,
                        help="JSONL file keeping finished rows (default .rosetta/bench/optimizers-AGENT.jsonl)")
    parser.add_argument("--fresh", action="store_true", help="measure every row again, ignoring kept rows")
    parser.add_argument("--rows", default=None,
                        help="measure only these rows now (comma-separated: unoptimized, fixed-k, random, rosetta, "
                             "dspy-labeled, dspy-bootstrap, dspy-mipro); kept rows are still shown")
    args = parser.parse_args()
    import logging

    logging.disable(logging.WARNING)
    for agent in args.agent or AGENTS:
        one = argparse.Namespace(**{**vars(args), "agent": agent})
        one.results = args.results or ROOT / ".rosetta" / "bench" / f"optimizers-{agent}.jsonl"
        with tempfile.TemporaryDirectory() as state:
            rows = run(one, Path(state))
        print_table(agent, rows, args.limit)


AGENTS = ("question-type", "news-topic", "vuln-triage", "leak-detector")
"""Two pure classification tasks on public data (TREC question type, AG News topic), one
label-plus-rationale task and one extraction task (see datasets/README.md)."""


def run(args: argparse.Namespace, state: Path) -> list[dict]:
    from rosetta.optimize.cache import EvalCache
    from rosetta.optimize.context import load_context
    from rosetta.optimize.evaluation import Budget, Evaluator
    from rosetta.optimize.search import run_search
    from rosetta.optimize.space import label_function
    from rosetta.optimize.study import SearchSettings
    from rosetta.config import load_settings
    from rosetta.render.prompt import Knobs
    from rosetta.render.renderer import render

    settings = load_settings(ROOT)
    context = load_context(ROOT / "signatures" / f"{args.agent}.md", MODEL, settings=settings)
    if args.limit:
        from dataclasses import replace

        data = context.data
        context.data = replace(data, train=data.train[: args.limit * 2], dev=data.dev[: args.limit],
                               test=data.test[: args.limit])
    signature, model, adapter, data, metric = (context.signature, context.model, context.adapter, context.data,
                                               context.metric)
    adapters = {adapter.name: adapter}
    low, high = signature.demo_range
    rows: list[dict] = []
    keys = ("unoptimized", "fixed-k", "random", "rosetta", *DSPY_ROWS)
    fingerprints = {key: fingerprint(args, data, row="search" if key == "rosetta" else "dspy" if key in DSPY_ROWS
                                     else "render") for key in keys}
    kept = Checkpoint(args.results, fingerprints, fresh=args.fresh)
    wanted = set(args.rows.split(",")) if args.rows else set(keys) - (set(DSPY_ROWS) if args.skip_dspy else set())
    if wanted - set(keys):
        raise SystemExit(f"--rows: unknown row(s) {', '.join(sorted(wanted - set(keys)))}; "
                         f"choose from {', '.join(keys)}")

    def measured(key: str, measure: Callable[[], None], progress: Path | None = None) -> None:
        """Reuse the row measured earlier under the same settings, else measure it now and keep it
        (then a long row's ``progress`` directory is no longer needed)."""
        earlier = kept.row(key)
        if earlier is None and key not in wanted:
            return
        if earlier is not None:
            rows.append(earlier)
            print(f"  {earlier['method']}: kept from {earlier['measured_at']}", file=sys.stderr)
            return
        measure()
        rows[-1]["key"] = key
        kept.add(rows[-1])
        if progress is not None:
            shutil.rmtree(progress, ignore_errors=True)

    def score(name: str, prompt: object, calls: int, started: float, note: str = "",
              cache: EvalCache | None = None) -> None:
        evaluator = Evaluator(context.agent, metric, cache or EvalCache(None), Budget())
        answers = evaluator.answers(prompt, data.test)
        scores = [metric.score(a.data, e.output, valid=a.valid) for a, e in zip(answers, data.test, strict=True)]
        rows.append({"method": name, "test": sum(scores) / len(scores), "parsed": sum(a.valid for a in answers) /
                     len(answers), "calls": calls, "wall_s": time.monotonic() - started, "note": note})
        print(f"  {name}: test {rows[-1]['test']:.3f}, {calls} calls, {rows[-1]['wall_s']:.0f}s", file=sys.stderr)

    print(f"{args.agent} on {MODEL}: {data.summary()}", file=sys.stderr)
    train_demos = tuple(_demo(e) for e in data.train)
    with_train = signature.model_copy(update={"demos": train_demos})
    k = max(high, 1)

    def unoptimized() -> None:
        started = time.monotonic()
        score("unoptimized render", render(signature, model, adapters=adapters), 0, started)

    def fixed_shot() -> None:
        started = time.monotonic()
        fixed = render(with_train, model, Knobs(demo_ids=tuple(d.id for d in train_demos[:k]), demo_count=k),
                       adapters=adapters)
        score(f"fixed {k}-shot", fixed, 0, started)

    def random_search() -> None:
        started = time.monotonic()
        rng = random.Random(args.seed)
        budget = Budget()
        evaluator = Evaluator(context.agent, metric, EvalCache(None), budget)
        label_of = label_function(signature)
        best = None
        sets = max(1, args.random_calls // len(data.dev))
        for _ in range(sets):
            chosen = balanced_sample(train_demos, k, rng, label_of)
            prompt = render(with_train, model, Knobs(demo_ids=tuple(d.id for d in chosen), demo_count=k),
                            adapters=adapters)
            value = sum(evaluator.scores(prompt, data.dev)) / len(data.dev)
            if best is None or value > best[0]:
                best = (value, prompt)
        kind = "label-balanced" if label_of else "random"
        score(f"random search ({sets} {kind} demo sets × {len(data.dev)} dev)", best[1], budget.calls, started)

    def rosetta_search() -> None:
        started = time.monotonic()
        search = SearchSettings(trials=args.trials, max_calls=args.max_calls, seed=args.seed, proposer=MODEL)
        cache = EvalCache(state / "cache.sqlite")
        outcome = run_search(context.agent, signature, model, adapter, data, metric, search, cache=cache,
                             default_storage=state / "study.journal")
        # the search chooses on dev only; the winner's test pass is scored here, once, through the runtime
        race = outcome.race
        interval = outcome.dev_interval or (outcome.dev_score, outcome.dev_score)
        score(f"rosetta (--max-calls {args.max_calls})", outcome.prompt, outcome.calls, started, cache=cache,
              note=f"{outcome.trials} candidates raced (rows per rung {race['rows']}, kept {race['keep']}), "
                   f"{outcome.pruned} out, {outcome.cut_short} stopped by the budget; winner: candidate "
                   f"{race['winner']} ({outcome.kind}), dev {outcome.dev_score:.3f} "
                   f"[{interval[0]:.3f}, {interval[1]:.3f}] on {outcome.dev_examples} rows; rows scored by "
                   f"{outcome.scoring}; calls by phase {outcome.phases}" + (f"; {outcome.stopped}" if outcome.stopped
                                                                            else ""))

    # rosetta runs before DSPy's optimizers (the longest rows), so an interrupted run keeps it
    measured("unoptimized", unoptimized)
    measured("fixed-k", fixed_shot)
    measured("random", random_search)
    measured("rosetta", rosetta_search)
    for name in DSPY_ROWS:
        progress = args.results.parent / f"{args.agent}-{name}-{fingerprints[name]}"
        measured(name, lambda name=name, progress=progress: rows.append(dspy_row(name, context, args.seed, progress)),
                 progress)
    ours = [row for row in rows if row["key"] == "rosetta"]
    return [row for row in rows if row["key"] != "rosetta"] + ours  # shown last, below the rows it is compared with


SEARCH_CODE = ("search.py", "study.py", "space.py", "race.py", "label_odds.py", "proposer.py")
"""rosetta's search (src/rosetta/optimize/): only the rosetta row depends on these files."""

DSPY_CODE = ("optimize/dspy_backend.py", "optimize/metrics.py", "datasets.py",
             "optimize/context.py", "optimize/judge.py", "providers/", "definition/", "signature.py",
             "schema_types.py", "parts.py", "config.py", "errors.py", "project.py")
"""What a DSPy row runs of rosetta (under src/rosetta/): loading the agent, its data and metric, the
glue to DSPy and the embedded model's provider (which finds the weights through project.py; the
answer cue it shares with the renderer lives in providers/kinds.py). Checked
by tracing a smoke run of the row (``--limit 2``): every rosetta function it called lives in one of
these files.
DSPy formats its own prompts, so improving rosetta's renderer or search does not re-measure these
rows, which take hours each; DSPy's and litellm's versions count instead."""


def fingerprint(args: argparse.Namespace, data: object, *, row: str) -> str:
    """What a kept row must have been measured under to be reused: the same code, decoder build, data,
    model and settings. ``row`` says which code counts: ``search`` (rosetta's row) all of rosetta;
    ``render`` (the unoptimized, k-shot and random-search rows) all but the search's own modules, so
    improving the search re-measures rosetta's row alone; ``dspy`` only ``DSPY_CODE``. No row counts
    ``NEVER_RUN``'s packages, and only the DSPy rows count ``DSPY_ONLY`` and ``dspy_row``."""
    from importlib.metadata import version

    from rosetta.providers.local_revision import answerer_revision

    source_root = ROOT / "src" / "rosetta"
    code = hashlib.sha256()
    for source in sorted(source_root.rglob("*.py")):
        relative = source.relative_to(source_root).as_posix()
        if _runs(row, relative):
            code.update(relative.encode() + b"\0" + source.read_bytes())
    # the bench's own code: a DSPy row is measured by dspy_row alone, the other rows by the rest of this file
    bench_code, dspy_code = Path(__file__).resolve().read_text(encoding="utf-8"), inspect.getsource(dspy_row)
    code.update((dspy_code if row == "dspy" else bench_code.replace(dspy_code, "")).encode())
    settings = {"code": code.hexdigest(), "decoder": answerer_revision(MODEL), "agent": args.agent, "model": MODEL,
                "data": data.sha256, "random_calls": args.random_calls, "seed": args.seed,
                "limit": args.limit, "litellm": version("litellm")}
    if row == "search":
        settings.update(max_calls=args.max_calls, trials=args.trials)
    if row == "dspy":
        settings.update(dspy=version("dspy"))
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


def _runs(row: str, relative: str) -> bool:
    """Whether a ``row`` of this kind runs rosetta's module at ``relative`` (to src/rosetta/)."""
    if row == "dspy":
        return any(relative == part or (part.endswith("/") and relative.startswith(part)) for part in DSPY_CODE)
    if relative.startswith(NEVER_RUN) or relative == DSPY_ONLY:
        return False
    return row == "search" or not (relative.startswith("optimize/")
                                   and relative.rpartition("/")[2] in SEARCH_CODE)


DSPY_ONLY = "optimize/dspy_backend.py"
"""The glue to DSPy: only the DSPy rows run it."""

NEVER_RUN = ("cli/", "notebook/", "verify/", "rollout/")
"""Packages no row runs (the bench calls the search and the runtime directly): editing them
measures nothing again."""


def balanced_sample(demos: tuple, k: int, rng: random.Random, label_of: Callable | None) -> list:
    """``k`` demos taking the labels in turn (a shuffled label order, a random row of each), or a
    plain random sample when the output has no label."""
    if label_of is None:
        return rng.sample(demos, k)
    groups: dict[str, list] = {}
    for demo in demos:
        groups.setdefault(label_of(demo.output), []).append(demo)
    pools = {label: rng.sample(rows, len(rows)) for label, rows in sorted(groups.items())}
    labels = list(pools)
    rng.shuffle(labels)
    chosen: list = []
    while len(chosen) < k and any(pools.values()):
        for label in labels:
            if pools[label] and len(chosen) < k:
                chosen.append(pools[label].pop())
    return chosen


class Checkpoint:
    """Finished rows on disk, one JSON line each, so an interrupted multi-hour run loses one row at most."""

    def __init__(self, path: Path, fingerprints: dict[str, str], *, fresh: bool) -> None:
        self.path, self.fingerprints = path, fingerprints  # row key → the fingerprint it must match
        self.rows: dict[str, dict] = {}
        if fresh or not path.exists():
            return
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:  # a line torn by a kill mid-write: that row is measured again
                continue
            if isinstance(row, dict) and row.get("fingerprint") == fingerprints.get(row.get("key")):
                self.rows[row["key"]] = {**row, "fresh": False}

    def row(self, key: str) -> dict | None:
        return self.rows.get(key)

    def add(self, row: dict) -> None:
        row.update(fingerprint=self.fingerprints[row["key"]], fresh=True,
                   measured_at=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps({k: v for k, v in row.items() if k != "fresh"}) + "\n")


DSPY_ROWS = ("dspy-labeled", "dspy-bootstrap", "dspy-mipro")


class RowProgress:
    """A long row's state across interruptions (kept in ``directory``): the wall time spent by
    earlier attempts, saved every few seconds so a SIGKILL loses at most that much of it."""

    def __init__(self, directory: Path, every_s: float = 10.0) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory, self.file = directory, directory / "elapsed.json"
        saved = json.loads(self.file.read_text(encoding="utf-8")) if self.file.exists() else {}
        self.before, self.attempts = float(saved.get("wall_s", 0.0)), int(saved.get("attempts", 0)) + 1
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._save()
        threading.Thread(target=self._tick, args=(every_s,), daemon=True).start()

    def elapsed(self) -> float:
        return self.before + time.monotonic() - self.started

    def stop(self) -> None:
        self._stop.set()

    def _save(self) -> None:
        temporary = self.file.with_suffix(".tmp")
        temporary.write_text(json.dumps({"wall_s": self.elapsed(), "attempts": self.attempts}), encoding="utf-8")
        temporary.replace(self.file)

    def _tick(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            self._save()


def dspy_row(name: str, context: object, seed: int, directory: Path) -> dict:
    """One DSPy optimizer, compiled on train/dev and scored by DSPy on test in its own format; its
    answers go through DSPy's own response cache, kept in ``directory`` until the row is done."""
    import dspy

    from rosetta.optimize.dspy_backend import compile_with_dspy, dspy_examples, dspy_lm, dspy_metric

    labels = {"dspy-labeled": "DSPy LabeledFewShot", "dspy-bootstrap": "DSPy BootstrapFewShotWithRandomSearch",
              "dspy-mipro": "DSPy MIPROv2 (auto=light)"}
    signature, data, metric = context.signature, context.data, context.metric
    progress = RowProgress(directory)
    dspy.configure_cache(enable_disk_cache=True, enable_memory_cache=True, disk_cache_dir=str(directory / "cache"))
    lm = dspy_lm(context.model, signature)
    lm.cache = True  # DSPy's default; a cached answer still counts in lm.history, so calls are unchanged
    resumed = f"; resumed {progress.attempts - 1}×, wall time summed over attempts" if progress.attempts > 1 else ""
    train, dev, test = (dspy_examples(signature, split) for split in (data.train, data.dev, data.test))
    try:
        program = compile_with_dspy(name, signature, train, dev, metric, lm, seed=seed,
                                    demos=max(signature.demo_range[1], 1))
    except Exception as error:  # MIPROv2's proposer chokes on a weak model: report it
        message = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"[:120]
        print(f"  {labels[name]}: crashed ({message})", file=sys.stderr)
        wall = progress.elapsed()
        progress.stop()
        return {"method": labels[name], "test": None, "parsed": None, "calls": len(lm.history),
                "wall_s": wall, "note": f"crashed: {message}{resumed}"}
    calls = len(lm.history)
    total, parsed, scorer = 0.0, 0, dspy_metric(signature, metric)
    with dspy.context(lm=lm):
        for example in test:
            try:
                prediction = program(**example.inputs())
            except Exception:  # DSPy could not parse the answer (its adapters raise)
                continue
            if signature.output_from_dspy(prediction):
                parsed += 1
                total += scorer(example, prediction)
    row = {"method": labels[name], "test": total / len(test), "parsed": parsed / len(test), "calls": calls,
           "wall_s": progress.elapsed(), "note": f"{len(program.predictors()[0].demos)} demos{resumed}"}
    progress.stop()
    print(f"  {row['method']}: test {row['test']:.3f}, parsed {row['parsed']:.0%}, {calls} calls", file=sys.stderr)
    return row


def _demo(example: object) -> object:
    from rosetta.parts import Demo

    return Demo(id=f"train:{example.id}", inputs=example.inputs, output=example.output)


def print_table(agent: str, rows: list[dict], limit: int | None = None) -> None:
    print(f"\n{agent} on {MODEL} ({os.cpu_count()} CPUs); test score = the agent's metric on its test split"
          + (f" — SMOKE RUN on {limit} rows per split, not a measurement" if limit else ""))
    print(f"{'method':<52} {'test':>6} {'parsed':>7} {'calls':>6} {'wall s':>7}  note")
    for row in rows:
        test = "—" if row["test"] is None else f"{row['test']:.3f}"
        parsed = "—" if row["parsed"] is None else f"{row['parsed']:.0%}"
        note = row["note"] if row.get("fresh", True) else f"{row['note']} [kept: measured {row['measured_at']}]".strip()
        print(f"{row['method']:<52} {test:>6} {parsed:>7} {row['calls']:>6} {row['wall_s']:>7.0f}  {note}")
    if not rows or rows[-1].get("key") != "rosetta":
        print("\ntarget: not judged — rosetta's row has not been measured yet")
        return
    ours = rows[-1]
    others = [r for r in rows[:-1] if r["test"] is not None]
    if ours["test"] is not None and others:
        beaten = all(ours["test"] >= r["test"] for r in others)
        random_row = next((r for r in rows if r["method"].startswith("random search")), None)
        above = random_row is not None and ours["test"] > random_row["test"] and ours["calls"] <= 150
        print(f"\ntarget: rosetta ≥ every other row: {'met' if beaten else 'MISSED'}; "
              f"strictly above the {random_row['calls'] if random_row else '—'}-call random search with ≤ 150 calls: "
              f"{'yes' if above else 'no'} (needed on three of the four agents)")


if __name__ == "__main__":
    main()
