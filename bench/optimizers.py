"""Benchmark: prompt optimizers on the embedded local model, same agent, data and model, one run.

Rows (each scored on the agent's test split; "calls" are the model calls the method spent
choosing its prompt, the test pass excluded; wall time includes the test pass):

- unoptimized render — rosetta's per-model render of the definition, no search;
- fixed k-shot — the first k train rows as demos (k = the definition's count_range max);
- k nearest demos, no search — per request, the k train rows nearest to it (rosetta's lexical
  TF-IDF retrieval, the pool carried in the prompt): retrieval alone, 0 calls; it is the prior
  rosetta's search starts from and must beat;
- nearest-label vote, no model — the same k nearest train rows per test row, and no model at all:
  the label most of them carry (ties: the nearer), answered with that row's output (without a label:
  the nearest row's output) — the floor a prompt must clear to be worth a model call;
- random search — label-balanced random demo sets (labels taken in turn; plain samples where the
  output has no label), each scored on all of dev, as many as 400 calls allow (8 × 50 dev rows,
  10 × 40), the best one on dev;
- DSPy LabeledFewShot and KNNFewShot (k nearest train rows as labeled demos, found with the same
  lexical TF-IDF similarity as rosetta's, no bootstrapping), run and scored by DSPy in its own prompt
  formats (parsed = answers DSPy could parse);
- DSPy BootstrapFewShotWithRandomSearch and MIPROv2 (auto="light") on the agent's ``to_dspy()``
  signature, each twice: run and scored by DSPy in its own formats, and *its choice* (instructions
  and demos) rendered by rosetta and scored through rosetta's runtime (``program_prompt``), so DSPy's
  search is measured apart from DSPy's prompt format; a crash is reported as such;
- rosetta — ``compile --optimize`` with ``--max-calls 150``, with the winner's kind.

rosetta, the random search and DSPy's two searches run once per ``--seeds`` (default 0, 1, 2: the
search's seed; for BootstrapFewShotWithRandomSearch, which has none, the train order); tables show
the mean ± sd over seeds. No row sees test before its prompt is fixed.

Everything rosetta scores goes through the runtime (``Agent.run_prompt``). The search chooses on dev
only, with its own cold cache; every row's test answers are paid for here, through that same path,
after its prompt is fixed, into one cache per agent and version of the code (git-ignored), so a
prompt that sends the same requests as another row's (rosetta's artifact when the prior is kept) is
not paid for twice — greedy decoding gives it the same answers.

A full run takes many hours on a small CPU, so each finished row is kept in ``--results`` (JSONL, keyed
by the agent, seed, data hash and settings; by default ``bench/results/optimizers-AGENT.jsonl``, which
is committed, so the numbers in bench/README.md can be checked row by row, with the program DSPy
chose). Run the same command again after an interruption and the finished rows are reused — the
table marks them with the time they were measured — while the rest run now. A DSPy row (hours each)
also survives interruption inside itself: DSPy's own response cache and the row's wall time so far
are kept in a folder beside the results file (git ignores it), so a rerun on the same machine replays
the answers it already paid for (still counted as calls) and the row's wall time is the sum over its
attempts. ``--fresh`` measures everything again.

    python bench/optimizers.py [--agent question-type ...] [--seeds 0,1,2] [--max-calls 150] [--skip-dspy]
                               [--rows KEYS] [--fresh]

With no ``--agent``, the eight agents of :data:`AGENTS` (the four bundled ones of the measurements in
bench/README.md, then the four of bench/agents/ on public sets), one table each, then the targets
over all of them, and the paired per-row difference between rosetta's artifact and its prior (k
nearest demos, no search) on test: per agent and pooled, with a hierarchical bootstrap interval
(seeds, then rows), and how many (agent, seed) runs are significantly worse than the prior (a
one-sided paired test at 95%). Every row keeps its per-row test scores for that, and for the oracle:
the best of the prompts scored here, chosen on one half of the test rows and scored on the other
(halves swapped, the two averaged), beside rosetta's score — how much a better choice among these
prompts could have gained; and beside it the oracle of the search's whole pool, from the candidates
``bench/search_pool.py`` kept (each scored on all of dev and test), where it kept them.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import os
import random
import re
import shutil
import statistics
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
    parser.add_argument("--skip-dspy", action="store_true", help="leave out the DSPy rows")
    parser.add_argument("--seeds", default="0,1,2",
                        help="seeds of the searches (rosetta, random, DSPy's two searches), comma-separated")
    parser.add_argument("--limit", type=int, default=None,
                        help="smoke run: use only the first N rows of each split (not a measurement)")
    parser.add_argument("--results", type=Path, default=None,
                        help="JSONL file keeping finished rows (default bench/results/optimizers-AGENT.jsonl)")
    parser.add_argument("--fresh", action="store_true", help="measure every row again, ignoring kept rows")
    parser.add_argument("--rows", default=None,
                        help=f"measure only these rows now (comma-separated: {', '.join(ROWS)}); kept rows are "
                             "still shown")
    args = parser.parse_args()
    try:
        args.seeds = tuple(dict.fromkeys(int(seed) for seed in args.seeds.split(",") if seed.strip()))
    except ValueError:
        parser.error(f"--seeds: {args.seeds!r} is not a comma-separated list of integers, e.g. 0,1,2")
    if not args.seeds:
        parser.error("--seeds: name at least one seed, e.g. 0")
    wanted = set(args.rows.split(",")) if args.rows else set(ROWS) - (set(DSPY_ROWS) if args.skip_dspy else set())
    if wanted - set(ROWS):
        parser.error(f"--rows: unknown row(s) {', '.join(sorted(wanted - set(ROWS)))}; choose from {', '.join(ROWS)}")
    args.wanted = wanted
    import logging

    logging.disable(logging.WARNING)
    tables = {}
    for agent in args.agent or AGENTS:
        one = argparse.Namespace(**{**vars(args), "agent": agent})
        one.results = args.results or ROOT / "bench" / "results" / f"optimizers-{agent}.jsonl"
        with tempfile.TemporaryDirectory() as state:
            rows = run(one, Path(state))
        tables[agent] = summarize(rows)
        print_table(agent, tables[agent], args.limit)
    print_targets(tables)
    print_paired(tables)
    print_oracle(tables)


AGENTS = ("question-type", "news-topic", "vuln-triage", "leak-detector", "review-sentiment", "sms-spam",
          "email-spam", "reuters-topic")
"""The bundled agents: two pure classification tasks on public data (TREC question type, AG News
topic), one label-plus-rationale task and one extraction task; then four agents of bench/agents/ on
public sets nobody here tuned to (UCI review sentences, the SMS Spam Collection, SpamAssassin, Reuters
R8; 300 test rows each). datasets/README.md says where each set comes from."""


def definition_of(agent: str) -> Path:
    """The agent's definition: a bundled one in signatures/, else one of the bench's in bench/agents/."""
    bundled = ROOT / "signatures" / f"{agent}.md"
    return bundled if bundled.is_file() else ROOT / "bench" / "agents" / f"{agent}.md"

ROWS = ("unoptimized", "fixed-k", "nearest-k", "nearest-vote", "random", "dspy-labeled", "dspy-knn", "dspy-bootstrap",
        "dspy-mipro", "rosetta")
"""The rows, in the order they are measured and shown (rosetta last, below the rows it is compared
with; the cheap rows first, so an interrupted run keeps them)."""

SEEDED_ROWS = ("random", "rosetta", "dspy-bootstrap", "dspy-mipro")
"""Rows measured once per seed (the searches); the others do not depend on one."""

DSPY_ROWS = ("dspy-labeled", "dspy-knn", "dspy-bootstrap", "dspy-mipro")

DSPY_SEARCHES = ("dspy-bootstrap", "dspy-mipro")
"""DSPy rows whose choice is also scored through rosetta's runtime (row key ``NAME-runtime``)."""

METHODS = {
    "unoptimized": "unoptimized render", "nearest-k": "k nearest demos, no search",
    "nearest-vote": "nearest-label vote, no model",
    "random": "random search", "dspy-labeled": "DSPy LabeledFewShot",
    "dspy-knn": "DSPy KNNFewShot (same retrieval, DSPy's format)",
    "dspy-bootstrap": "DSPy BootstrapFewShotWithRandomSearch, DSPy's format",
    "dspy-bootstrap-runtime": "DSPy BootstrapFewShotWithRandomSearch's choice, rosetta's runtime",
    "dspy-mipro": "DSPy MIPROv2 (auto=light), DSPy's format",
    "dspy-mipro-runtime": "DSPy MIPROv2 (auto=light)'s choice, rosetta's runtime",
}


def run(args: argparse.Namespace, state: Path) -> list[dict]:
    from rosetta.settings import load_settings
    from rosetta.optimize.cache import EvalCache
    from rosetta.optimize.context import load_context
    from rosetta.optimize.dspy_backend import program_prompt
    from rosetta.optimize.evaluation import Budget, Evaluator
    from rosetta.optimize.search import run_search
    from rosetta.optimize.space import label_function
    from rosetta.optimize.study import SearchSettings
    from rosetta.render.prompt import Knobs
    from rosetta.render.renderer import render

    settings = load_settings(ROOT)
    context = load_context(definition_of(args.agent), MODEL, settings=settings)
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
    seeds = args.seeds

    def key_of(name: str, seed: int | None) -> str:
        return name if seed is None else f"{name}@{seed}"

    def kind_of(name: str) -> str:
        return "search" if name == "rosetta" else "dspy" if name in DSPY_ROWS else "render"

    plan = [(name, seed) for name in ROWS for seed in (seeds if name in SEEDED_ROWS else (None,))]
    fingerprints = {key_of(name, seed): fingerprint(args, data, row=kind_of(name), seed=seed) for name, seed in plan}
    for name in DSPY_SEARCHES:  # DSPy's choice through rosetta's runtime: the choice's and the renderer's code
        for seed in seeds:
            fingerprints[key_of(f"{name}-runtime", seed)] = hashlib.sha256(
                (fingerprints[key_of(name, seed)] + fingerprint(args, data, row="render", seed=None)).encode()
            ).hexdigest()[:16]
    kept = Checkpoint(args.results, fingerprints, fresh=args.fresh)

    def measured(name: str, seed: int | None, measure: Callable[[], dict], progress: Path | None = None) -> None:
        """Reuse the row measured earlier under the same settings, else measure it now and keep it
        (then a long row's ``progress`` directory is no longer needed)."""
        key = key_of(name, seed)
        earlier = kept.row(key)
        if earlier is None and name.removesuffix("-runtime") not in args.wanted:
            return
        if earlier is not None:
            rows.append(earlier)
            print(f"  {earlier['method']}{'' if seed is None else f' (seed {seed})'}: kept from "
                  f"{earlier['measured_at']}", file=sys.stderr)
            return
        row = measure()
        row.update(key=key, name=name, seed=seed)
        kept.add(row)
        rows.append(row)
        if progress is not None:
            shutil.rmtree(progress, ignore_errors=True)

    # one cache of test answers for the agent's rows: a row whose prompt sends the same requests as
    # another's (rosetta's artifact when the prior is kept) gets the same greedy answers without
    # paying for them twice; nothing in it is seen before a row's prompt is fixed
    # (one file per version of the code that answers: the render rows' fingerprint, git-ignored)
    answers_file = f"{args.agent}-test-answers-{fingerprint(args, data, row='render', seed=None)}.sqlite"
    test_answers = EvalCache(args.results.parent / answers_file)

    def score(name: str, prompt: object, calls: int, started: float, note: str = "", **extra: object) -> dict:
        evaluator = Evaluator(context.agent, metric, test_answers, Budget())
        answers = evaluator.answers(prompt, data.test)
        scores = [metric.score(a.data, e.output, valid=a.valid) for a, e in zip(answers, data.test, strict=True)]
        row = {"method": name, "test": sum(scores) / len(scores), "parsed": sum(a.valid for a in answers) /
               len(answers), "calls": calls, "wall_s": time.monotonic() - started, "note": note,
               "per_row": scores, **extra}
        print(f"  {name}: test {row['test']:.3f}, {calls} calls, {row['wall_s']:.0f}s", file=sys.stderr)
        return row

    print(f"{args.agent} on {MODEL}: {data.summary()}", file=sys.stderr)
    train_demos = tuple(_demo(e) for e in data.train)
    with_train = signature.model_copy(update={"demos": train_demos})
    k = max(high, 1)

    def unoptimized() -> dict:
        started = time.monotonic()
        return score("unoptimized render", render(signature, model, adapters=adapters), 0, started)

    def fixed_shot() -> dict:
        started = time.monotonic()
        fixed = render(with_train, model, Knobs(demo_ids=tuple(d.id for d in train_demos[:k]), demo_count=k),
                       adapters=adapters)
        return score(f"fixed {k}-shot", fixed, 0, started)

    def nearest() -> dict:
        started = time.monotonic()
        retrieved = render(with_train, model, Knobs(demo_ids=tuple(d.id for d in train_demos), demo_count=k,
                                                    demo_selection="nearest"), adapters=adapters)
        return score(f"{k} nearest demos, no search", retrieved, 0, started)

    def nearest_vote() -> dict:
        """The k nearest train rows of each test row, as the nearest-demos row retrieves them, and no
        model: the label most of them carry (ties: the nearer), answered with the nearest such row's
        output; without a label, the nearest row's output."""
        from collections import Counter

        started = time.monotonic()
        pool = render(with_train, model, Knobs(demo_ids=tuple(d.id for d in train_demos), demo_count=k,
                                               demo_selection="nearest"), adapters=adapters).demo_pool
        label_of = label_function(signature)
        scores = []
        for example in data.test:
            near = pool.choose(example.inputs)[::-1]  # the most similar first
            output = near[0].output
            if label_of is not None:
                votes = Counter(label_of(d.output) for d in near)
                top = max(votes.values())
                output = next(d.output for d in near if votes[label_of(d.output)] == top)
            scores.append(metric.score(output, example.output, valid=True))
        row = {"method": f"nearest-label vote of {k} train rows, no model", "test": sum(scores) / len(scores),
               "parsed": 1.0, "calls": 0, "wall_s": time.monotonic() - started, "per_row": scores,
               "note": "labels voted" if label_of is not None else "the nearest row's output copied"}
        print(f"  {row['method']}: test {row['test']:.3f}", file=sys.stderr)
        return row

    def random_search(seed: int) -> dict:
        started = time.monotonic()
        rng = random.Random(seed)
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
        return score(f"random search ({sets} {kind} demo sets × {len(data.dev)} dev)", best[1], budget.calls,
                     started)

    def rosetta_search(seed: int) -> dict:
        started = time.monotonic()
        # the study in a journal named by URL: a throwaway, not a project's own (which is sealed under its key)
        journal = state / f"study-{seed}.journal"
        search = SearchSettings(trials=args.trials, max_calls=args.max_calls, seed=seed, proposer=MODEL,
                                storage=f"journal:{journal}")
        cache = EvalCache(state / f"cache-{seed}.sqlite")
        outcome = run_search(context.agent, signature, model, adapter, data, metric, search, cache=cache,
                             default_storage=journal)
        # the search chooses on dev only; the winner's test pass is scored here, once, through the runtime
        race = outcome.race
        interval = outcome.dev_interval or (outcome.dev_score, outcome.dev_score)
        confirmation = race.get("confirmation", {})
        return score(f"rosetta (--max-calls {args.max_calls})", outcome.prompt, outcome.calls, started,
                     kind=outcome.kind, confirmation=confirmation,
                     note=f"{outcome.trials} candidates raced (screening rows per rung {race['rows']}, kept "
                          f"{race['keep']}, {race.get('confirm')} confirmation rows), {outcome.pruned} out, "
                          f"{outcome.cut_short} stopped by the budget; prior candidate {race.get('prior')} "
                          f"({race.get('prior_kind')}), challenger {race.get('challenger')} "
                          f"({race.get('challenger_kind')}), confirmation {confirmation}; winner: candidate "
                          f"{race['winner']} ({outcome.kind}), dev {outcome.dev_score:.3f} "
                          f"[{interval[0]:.3f}, {interval[1]:.3f}] on {outcome.dev_examples} rows; rows scored by "
                          f"{outcome.scoring}; calls by phase {outcome.phases}"
                          + (f"; {outcome.stopped}" if outcome.stopped else ""))

    def dspy_choice(name: str, seed: int) -> dict:
        """DSPy's choice (kept with its row) rendered by rosetta and scored through the runtime."""
        started = time.monotonic()
        chosen = kept.row(key_of(name, seed))
        if chosen is None or chosen.get("program") is None:
            return {"method": METHODS[f"{name}-runtime"], "test": None, "parsed": None, "calls": 0, "wall_s": 0.0,
                    "note": "not measured: DSPy's row " + ("crashed" if chosen else "is not measured yet")}
        program = dspy_program(signature, chosen["program"])
        prompt, demos, instructions = program_prompt(signature, program, model, adapter)
        return score(METHODS[f"{name}-runtime"], prompt, chosen["calls"], started,
                     note=f"{len(demos)} demos" + (", DSPy's instructions" if instructions else ""))

    measured("unoptimized", None, unoptimized)
    measured("fixed-k", None, fixed_shot)
    measured("nearest-k", None, nearest)
    measured("nearest-vote", None, nearest_vote)
    for seed in seeds:
        measured("random", seed, lambda seed=seed: random_search(seed))
    for name in DSPY_ROWS:
        for seed in seeds if name in SEEDED_ROWS else (None,):
            progress = args.results.parent / f"{args.agent}-{name}-{fingerprints[key_of(name, seed)]}"
            measured(name, seed, lambda name=name, seed=seed, progress=progress:
                     dspy_row(name, context, seed, progress), progress)
            if name in DSPY_SEARCHES:
                measured(f"{name}-runtime", seed, lambda name=name, seed=seed: dspy_choice(name, seed))
    for seed in seeds:
        measured("rosetta", seed, lambda seed=seed: rosetta_search(seed))
    return rows


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


def fingerprint(args: argparse.Namespace, data: object, *, row: str, seed: int | None) -> str:
    """What a kept row must have been measured under to be reused: the same code, decoder build, data,
    model and settings. ``row`` says which code counts: ``search`` (rosetta's row) all of rosetta;
    ``render`` (the unoptimized, k-shot and random-search rows) all but the search's own modules, so
    improving the search re-measures rosetta's row alone; ``dspy`` only ``DSPY_CODE``. No row counts
    ``NEVER_RUN``'s packages, and only the DSPy rows count ``DSPY_ONLY`` and the bench's DSPy functions
    (:data:`DSPY_BENCH`). ``seed`` is the row's seed (None for a row that has none)."""
    from importlib.metadata import version

    from rosetta.local.revision import answerer_revision

    source_root = ROOT / "src" / "rosetta"
    code = hashlib.sha256()
    for source in sorted(source_root.rglob("*.py")):
        relative = source.relative_to(source_root).as_posix()
        if _runs(row, relative):
            code.update(relative.encode() + b"\0" + source.read_bytes())
    # the bench's own code: a DSPy row is measured by the DSPy functions alone, the other rows by the rest
    bench_code = Path(__file__).resolve().read_text(encoding="utf-8")
    dspy_code = "".join(inspect.getsource(function) for function in DSPY_BENCH)
    for function in (*REPORT, *(DSPY_BENCH if row != "dspy" else ())):  # the report measures nothing
        bench_code = bench_code.replace(inspect.getsource(function), "")
    code.update((dspy_code if row == "dspy" else bench_code).encode())
    settings = {"code": code.hexdigest(), "decoder": answerer_revision(MODEL), "agent": args.agent, "model": MODEL,
                "data": data.sha256, "random_calls": args.random_calls, "seed": seed,
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
        self.rows[row["key"]] = row
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps({k: v for k, v in row.items() if k != "fresh"}) + "\n")


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


def dspy_row(name: str, context: object, seed: int | None, directory: Path) -> dict:
    """One DSPy optimizer, compiled on train/dev and scored by DSPy on test in its own format; its
    answers go through DSPy's own response cache, kept in ``directory`` until the row is done. The
    row keeps the compiled program's state, so its choice can be scored through rosetta's runtime."""
    import dspy

    from rosetta.optimize.dspy_backend import compile_with_dspy, dspy_examples, dspy_lm, dspy_metric

    signature, data, metric = context.signature, context.data, context.metric
    progress = RowProgress(directory)
    dspy.configure_cache(enable_disk_cache=True, enable_memory_cache=True, disk_cache_dir=str(directory / "cache"))
    lm = dspy_lm(context.model, signature)
    lm.cache = True  # DSPy's default; a cached answer still counts in lm.history, so calls are unchanged
    resumed = f"; resumed {progress.attempts - 1}×, wall time summed over attempts" if progress.attempts > 1 else ""
    train, dev, test = (dspy_examples(signature, split) for split in (data.train, data.dev, data.test))
    k = max(signature.demo_range[1], 1)
    if name == "dspy-bootstrap":  # it has no seed of its own: its candidate sets follow train's order
        random.Random(seed).shuffle(train)
    try:
        if name == "dspy-knn":  # the k nearest train rows as labeled demos, by rosetta's own similarity
            fields = tuple(field.name for field in signature.inputs)
            program = dspy.KNNFewShot(k, train, lexical_vectorizer(fields), max_bootstrapped_demos=0,
                                      max_labeled_demos=k).compile(dspy.Predict(signature.to_dspy()))
        else:
            program = compile_with_dspy(name, signature, train, dev, metric, lm, seed=seed or 0, demos=k)
    except Exception as error:  # MIPROv2's proposer chokes on a weak model: report it
        message = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"[:120]
        print(f"  {METHODS[name]}: crashed ({message})", file=sys.stderr)
        wall = progress.elapsed()
        progress.stop()
        return {"method": METHODS[name], "test": None, "parsed": None, "calls": len(lm.history),
                "wall_s": wall, "note": f"crashed: {message}{resumed}", "program": None}
    calls = len(lm.history)
    total, parsed, scorer = 0.0, 0, dspy_metric(signature, metric)
    with dspy.context(lm=lm):
        for example in test:
            try:
                prediction = program(**example.inputs())
            except Exception:  # DSPy could not parse the answer (its adapters raise)
                continue
            if signature.output_from_dspy(prediction, validate=False):
                parsed += 1
                total += scorer(example, prediction)
    demos = f"{k} nearest demos per request" if name == "dspy-knn" else f"{len(program.predictors()[0].demos)} demos"
    row = {"method": METHODS[name], "test": total / len(test), "parsed": parsed / len(test), "calls": calls,
           "wall_s": progress.elapsed(), "note": f"{demos}{resumed}",
           "program": None if name == "dspy-knn" else json.loads(json.dumps(program.dump_state(), default=str))}
    progress.stop()
    print(f"  {row['method']}: test {row['test']:.3f}, parsed {row['parsed']:.0%}, {calls} calls", file=sys.stderr)
    return row


def dspy_program(signature: object, state: dict) -> object:
    """A DSPy program with the state a DSPy row kept (its chosen instructions and demos)."""
    import dspy

    program = dspy.Predict(signature.to_dspy())
    program.load_state(state)
    return program


def lexical_vectorizer(fields: tuple[str, ...]) -> object:
    """rosetta's nearest-demos similarity as a DSPy ``Embedder``: sublinear TF-IDF over the texts of
    its first call (DSPy's KNN passes the whole train pool first), unit length, so DSPy's dot product
    is the cosine rosetta ranks by. DSPy's ``field: value | field: value`` text loses its input
    ``fields``' names first, leaving the words rosetta compares."""
    from collections import Counter

    import dspy
    import numpy

    from rosetta.render.nearest import _TOKEN, _index, _vector

    names = re.compile(r"(?:^|\s\|\s)(?:" + "|".join(re.escape(name) for name in fields) + r"): ")
    fitted: dict[str, object] = {}

    def embed(texts: list[str]) -> object:
        texts = [names.sub("\n", text) for text in texts]
        if not fitted:
            idf, _ = _index(tuple(texts))
            fitted.update(idf=idf, vocabulary={token: n for n, token in enumerate(sorted(idf))})
        idf, vocabulary = fitted["idf"], fitted["vocabulary"]
        matrix = numpy.zeros((len(texts), len(vocabulary)), dtype=numpy.float32)
        for row, text in enumerate(texts):
            for token, weight in _vector(Counter(_TOKEN.findall(text.lower())), idf).items():
                matrix[row, vocabulary[token]] = weight
        return matrix

    return dspy.Embedder(embed, caching=False)


DSPY_BENCH = (dspy_row, dspy_program, lexical_vectorizer)
"""The bench's functions a DSPy row runs (part of its fingerprint; no other row's)."""


def _demo(example: object) -> object:
    from rosetta.parts import Demo

    return Demo(id=f"train:{example.id}", inputs=example.inputs, output=example.output)


def summarize(rows: list[dict]) -> list[dict]:
    """One line per method: the mean and sd of its test score over the seeds it ran with (rows that
    crashed left out), its mean calls, wall time and parse rate; in the order of :data:`ROWS`, each
    DSPy search's runtime line after its own."""
    order = [name for row_name in ROWS for name in (row_name, f"{row_name}-runtime")]
    groups: dict[str, list[dict]] = {}
    for row in rows:
        groups.setdefault(row.get("name") or row["key"].partition("@")[0], []).append(row)
    lines = []
    for name in sorted(groups, key=lambda n: order.index(n) if n in order else len(order)):
        group = sorted(groups[name], key=lambda r: (r.get("seed") is None, r.get("seed") or 0))
        scored = [r for r in group if r["test"] is not None]
        tests = [r["test"] for r in scored]
        mean = statistics.fmean(tests) if tests else None
        lines.append({
            "name": name, "method": group[0]["method"], "rows": group, "mean": mean,
            "sd": statistics.stdev(tests) if len(tests) > 1 else None, "seeds": [r.get("seed") for r in scored],
            "parsed": statistics.fmean(r["parsed"] for r in scored) if scored else None,
            "calls": statistics.fmean(r["calls"] for r in group),
            "wall_s": statistics.fmean(r["wall_s"] for r in group),
            "kinds": [r.get("kind") for r in scored if r.get("kind")],
            "kept": not any(r.get("fresh", True) for r in group)})
    return lines


def print_table(agent: str, lines: list[dict], limit: int | None = None) -> None:
    print(f"\n{agent} on {MODEL} ({os.cpu_count()} CPUs); test score = the agent's metric on its test split, "
          "mean ± sd over seeds" + (f" — SMOKE RUN on {limit} rows per split, not a measurement" if limit else ""))
    print(f"{'method':<66} {'test':>13} {'seeds':>5} {'parsed':>7} {'calls':>6} {'wall s':>7}  note")
    for line in lines:
        test = "—" if line["mean"] is None else f"{line['mean']:.3f}" + (
            f" ± {line['sd']:.3f}" if line["sd"] is not None else "")
        parsed = "—" if line["parsed"] is None else f"{line['parsed']:.0%}"
        seeded = [r for r in line["rows"] if r.get("seed") is not None]
        if seeded:
            note = "per seed " + ", ".join(f"{r['seed']}: " + ("—" if r["test"] is None else f"{r['test']:.3f}")
                                           for r in seeded)
            note += f"; winners: {', '.join(line['kinds'])}" if line["kinds"] else ""
        else:
            note = line["rows"][0]["note"]
        if line["kept"]:
            note += f" [kept: measured {max(r['measured_at'] for r in line['rows'])}]"
        print(f"{line['method'][:66]:<66} {test:>13} {len(line['seeds']):>5} {parsed:>7} {line['calls']:>6.0f} "
              f"{line['wall_s']:>7.0f}  {note}")
    for row in next((line["rows"] for line in lines if line["name"] == "rosetta"), []):
        print(f"  rosetta, seed {row['seed']}: {row['note']}")
    verdict = judge(lines)
    print(f"\ntarget: {verdict['text']}")


def judge(lines: list[dict]) -> dict:
    """This agent's targets: rosetta's mean at least the best other row's mean less one sd (the larger
    of the two rows' sds), and above the no-search nearest-demos row by more than rosetta's sd."""
    ours = next((line for line in lines if line["name"] == "rosetta" and line["mean"] is not None), None)
    if ours is None:
        return {"best": None, "above_nearest": None, "text": "not judged — rosetta's row has not been measured yet"}
    others = [line for line in lines if line["name"] != "rosetta" and line["mean"] is not None]
    best = max(others, key=lambda line: line["mean"], default=None)
    sd = ours["sd"] or 0.0
    within = best is None or ours["mean"] >= best["mean"] - max(sd, best["sd"] or 0.0)
    nearest = next((line for line in others if line["name"] == "nearest-k"), None)
    # rounded: float noise in two equal means is no gain
    above = None if nearest is None else round(ours["mean"] - nearest["mean"], 9) > round(sd, 9)
    text = (f"rosetta {ours['mean']:.3f} ± {sd:.3f} ({len(ours['seeds'])} seeds) against the best other row"
            + (f", {best['method']} {best['mean']:.3f}" if best else " (none)")
            + f": {'met' if within else 'MISSED'} (within one sd); "
            + ("above the no-search nearest-demos row by more than the sd: "
               + ("—" if nearest is None else f"{'yes' if above else 'no'} ({ours['mean'] - nearest['mean']:+.3f})")))
    return {"best": within, "above_nearest": above, "text": text}


def print_targets(tables: dict[str, list[dict]]) -> None:
    """The targets over every agent measured: within one sd of the best other row on each, and above
    the nearest-demos row by more than the sd on at least two."""
    verdicts = {agent: judge(lines) for agent, lines in tables.items()}
    if len(verdicts) < 2:
        return
    within = [agent for agent, v in verdicts.items() if v["best"]]
    above = [agent for agent, v in verdicts.items() if v["above_nearest"]]
    print(f"\ntargets over {len(verdicts)} agents: rosetta within one sd of the best other row on "
          f"{len(within)} ({', '.join(within) or 'none'}; needed: all); above k nearest demos by more than the sd on "
          f"{len(above)} ({', '.join(above) or 'none'}; needed: two)")


def paired(lines: list[dict], draws: int = 4000) -> dict | None:
    """rosetta's artifact against its prior (the k-nearest-demos row) on the same test rows: the mean
    per-row difference over seeds and rows, its 95% hierarchical bootstrap interval (seeds resampled,
    then each drawn seed's rows), the per-seed differences, and the seeds whose artifact a one-sided
    paired test at 95% finds worse than the prior. None when either row kept no per-row scores."""
    from rosetta.optimize.race import one_sided_p

    prior = next((line["rows"][0] for line in lines if line["name"] == "nearest-k"), None)
    ours = next((line for line in lines if line["name"] == "rosetta"), None)
    if prior is None or ours is None or "per_row" not in prior:
        return None
    runs = {r["seed"]: [a - b for a, b in zip(r["per_row"], prior["per_row"], strict=True)]
            for r in ours["rows"] if r.get("per_row")}
    if not runs:
        return None
    rng = random.Random(79)
    seeds = sorted(runs)
    means = []
    for _ in range(draws):
        resampled: list[float] = []
        for diffs in (runs[rng.choice(seeds)] for _ in seeds):  # seeds with replacement, then each one's rows
            resampled += rng.choices(diffs, k=len(diffs))
        means.append(statistics.fmean(resampled))
    worse = [seed for seed, diffs in runs.items() if one_sided_p([-d for d in diffs]) <= 0.05]
    ordered = sorted(means)
    return {"mean": statistics.fmean(d for diffs in runs.values() for d in diffs),
            "low": ordered[int(0.025 * draws)], "high": ordered[int(0.975 * draws) - 1],
            "per_seed": {seed: statistics.fmean(diffs) for seed, diffs in runs.items()}, "worse": worse,
            "rows": len(prior["per_row"]), "boot": means}  # the bootstrap means in draw order (pooled: drawn together)


def oracle(lines: list[dict], folds: int = 2) -> dict | None:
    """The best prompt this bench scored on test, chosen on one half of the test rows and scored on
    the other (then the halves swapped, and the two scores averaged): how much better a choice among
    these prompts could have done than rosetta's. The pool is every model row with per-row scores
    (each seed's row of a search apart); the no-model vote is not a prompt and is left out. None
    when rosetta's row or any other has no per-row scores, or test has fewer rows than halves."""
    pool = [row for line in lines if line["name"] != "nearest-vote" for row in line["rows"] if row.get("per_row")]
    ours = [row for row in pool if row.get("name") == "rosetta"]
    if not ours or len(pool) < 2:
        return None
    size = len(ours[0]["per_row"])
    if size < folds:  # a smoke run's one test row: no half to choose on
        return None
    order = list(range(size))
    random.Random(79).shuffle(order)
    halves = [order[fold::folds] for fold in range(folds)]
    scores = []
    for fold, held in enumerate(halves):
        chosen_on = [index for other, half in enumerate(halves) if other != fold for index in half]
        best = max(pool, key=lambda row: (statistics.fmean(row["per_row"][i] for i in chosen_on), -pool.index(row)))
        scores.append((statistics.fmean(best["per_row"][i] for i in held), best["method"]))
    value = statistics.fmean(score for score, _ in scores)
    mean = statistics.fmean(row["test"] for row in ours)
    return {"oracle": value, "rosetta": mean, "gap": value - mean, "chosen": [method for _, method in scores],
            "pool": len(pool), "rows": size}


def print_oracle(tables: dict[str, list[dict]], pools: Path = ROOT / "bench" / "results") -> None:
    """Two oracles per agent: the best of the prompts scored here, and the best of the search's whole
    pool as ``bench/search_pool.py`` kept it in ``pools`` (every candidate on all of test), each chosen
    on one half of test and scored on the other, beside rosetta's score."""
    from search_pool import kept_pool
    from search_pool import oracle as pool_oracle

    found = {agent: oracle(lines) for agent, lines in tables.items()}
    print("\noracle: the best of the prompts scored here (every model row; each seed of a search apart), and the "
          "best of the search's pool (bench/search_pool.py), chosen on one half of test and scored on the other, "
          "halves swapped:")
    for agent, result in found.items():
        if result is None:
            print(f"{agent:<22} — not enough rows with per-row test scores")
            continue
        print(f"{agent:<22} oracle {result['oracle']:.3f} vs rosetta {result['rosetta']:.3f}: gap "
              f"{result['gap']:+.3f} (pool of {result['pool']}; chose {' / '.join(dict.fromkeys(result['chosen']))})")
        pool = kept_pool(pools / f"pool-{agent}.jsonl")
        if pool and len(pool[0]["test"]) == result["rows"]:  # not a smoke run's few rows
            value, _ = pool_oracle(pool)
            print(f"{'':<22} the search's pool: oracle {value:.3f} vs rosetta {result['rosetta']:.3f}: gap "
                  f"{value - result['rosetta']:+.3f} ({len(pool)} candidates kept, the last measured "
                  f"{pool[-1].get('measured_at', '?')}; bench/search_pool.py)")


def print_paired(tables: dict[str, list[dict]]) -> None:
    """The paired per-row difference between rosetta's artifact and its prior on test, per agent and
    pooled (the mean of the agents' means; its interval from their bootstraps drawn together), with
    the targets: the lower bound above -0.02 on every agent, pooled at least 0, and at most 5% of the
    (agent, seed) runs significantly worse than the prior."""
    found = {agent: paired(lines) for agent, lines in tables.items()}
    print("\nrosetta's artifact − its prior (k nearest demos, no search), per test row, paired:")
    print(f"{'agent':<22} {'mean':>7} {'95% interval (seeds, then rows)':>33} {'per seed':<32} worse than the prior")
    for agent, result in found.items():
        if result is None:
            print(f"{agent:<22} — no per-row test scores kept for rosetta's rows or the prior's: measure them again")
            continue
        seeds = ", ".join(f"{seed}: {value:+.3f}" for seed, value in sorted(result["per_seed"].items()))
        interval = f"[{result['low']:+.3f}, {result['high']:+.3f}]"
        missed = " (lower bound below -0.02: MISSED)" if result["low"] < -0.02 else ""
        print(f"{agent:<22} {result['mean']:>+7.3f} {interval:>33} {seeds:<32} "
              f"{len(result['worse'])} of {len(result['per_seed'])}{missed}")
    measured = [result for result in found.values() if result is not None]
    if len(measured) < 2:
        return
    pooled = sorted(statistics.fmean(values) for values in zip(*(r["boot"] for r in measured)))
    mean = statistics.fmean(r["mean"] for r in measured)
    low, high = pooled[int(0.025 * len(pooled))], pooled[int(0.975 * len(pooled)) - 1]
    worse = sum(len(r["worse"]) for r in measured)
    runs = sum(len(r["per_seed"]) for r in measured)
    print(f"{'pooled':<22} {mean:>+7.3f} [{low:+.3f}, {high:+.3f}]; runs significantly worse than the prior: {worse} "
          f"of {runs} ({worse / runs:.0%}; target ≤ 5%); pooled lower bound {'≥ 0: met' if low >= 0 else '< 0: MISSED'}")


REPORT = (summarize, print_table, judge, print_targets, paired, print_paired, oracle, print_oracle)
"""The bench's functions that only report rows: editing them measures nothing again."""


if __name__ == "__main__":
    main()
