"""Benchmark: the search's whole candidate pool, every candidate on every dev and test row (issue 79).

At ``--max-calls 150`` the race sees each challenger on a few screening rows and one on the
confirmation rows, so its records cannot say what it missed. This script builds the same pool the
race builds (the same agent, data, model, seed, budget and space: rosetta's own set-up, run without
a call), then has every candidate answer all of dev (race and plain scores, in the race's row order)
and all of test, and reports per agent:

- **the oracle**: the pool's best candidate chosen on one half of the test rows and scored on the
  other (the halves swapped, the two averaged), beside rosetta's artifact on test (the rosetta rows of
  ``bench/optimizers.py``) — how much a better choice within this pool could have gained;
- **the dev-best**: the candidate with the best plain score on all of dev (what a race with calls
  to spare would choose) and its test score;
- **the pool by kind** (nearest-k, drawn retrieval policies, fixed demo sets, knob variants): how
  many, their mean and best dev and test — which candidates are worth racing;
- the full-dev matrices themselves, which ``bench/race_rungs.py --matrix`` replays.

Why not a ``--pruner none`` study: since issue 79 the race screens challengers on a third of dev and
only the best answers the rest (the confirmation rows), with or without halving, so no study journal
holds every candidate on all of dev any more.

Answers are cached per agent and version of the code (git-ignored, beside the results): test answers
in ``bench/optimizers.py``'s own test-answer cache (the prior's answers are the nearest-demos row's,
paid for once), dev answers in one of their own. Each finished candidate is kept, one JSON line, in
``bench/results/pool-AGENT.jsonl`` (committed) under a fingerprint of the code, data and settings, so
a rerun after an interruption resumes where it stopped. About (pool size) × (dev + test rows)
calls per agent: 14 × 350 on the public sets, hours per agent on two cores.

    python bench/search_pool.py [--agent question-type ...] [--seed 0] [--max-calls 150] [--report]

``--report`` measures nothing: it prints the tables from the kept candidates.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import random
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import optimizers  # noqa: E402  (the agents, the model, the fingerprint and the test-answer cache are its)

ROOT = optimizers.ROOT


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--agent", action="append", default=None,
                        help=f"agent to measure (repeatable; default: {', '.join(optimizers.AGENTS)})")
    parser.add_argument("--seed", type=int, default=0, help="the search's seed: which pool (default 0)")
    parser.add_argument("--max-calls", type=int, default=150, help="the budget the pool is built for (default 150)")
    parser.add_argument("--report", action="store_true", help="measure nothing: print what is kept")
    parser.add_argument("--dry-run", action="store_true",
                        help="build each pool and say what measuring it takes (candidates, kinds, calls); no call")
    parser.add_argument("--limit", type=int, default=None,
                        help="smoke run: use only the first N rows of each split (not a measurement)")
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results",
                        help="folder of the kept rows and caches (default bench/results)")
    args = parser.parse_args()
    import logging

    logging.disable(logging.WARNING)
    found = {}
    for agent in args.agent or optimizers.AGENTS:
        found[agent] = measure(argparse.Namespace(**{**vars(args), "agent": agent}))
    print_report(found)


def settings_of(args: argparse.Namespace) -> argparse.Namespace:
    """The settings ``bench/optimizers.py``'s fingerprint and cache names are computed from."""
    return argparse.Namespace(agent=args.agent, max_calls=args.max_calls, trials=None,
                              random_calls=400, limit=args.limit)


def measure(args: argparse.Namespace) -> dict:
    """Every candidate of the agent's pool on all of dev and test (kept ones reused); what the report needs."""
    from rosetta.optimize.cache import EvalCache
    from rosetta.optimize.context import load_context
    from rosetta.optimize.evaluation import Budget, Evaluator
    from rosetta.optimize.search import _Search
    from rosetta.optimize.space import SPACE_VERSION, label_function
    from rosetta.optimize.study import SearchSettings, study_name
    from rosetta.settings import load_settings

    bench = settings_of(args)
    context = load_context(optimizers.definition_of(args.agent), optimizers.MODEL, settings=load_settings(ROOT))
    if args.limit:
        from dataclasses import replace

        data = context.data
        context.data = replace(data, train=data.train[: args.limit * 2], dev=data.dev[: args.limit],
                               test=data.test[: args.limit])
    signature, model, adapter, data, metric = (context.signature, context.model, context.adapter, context.data,
                                               context.metric)
    results = args.results
    kept_file = results / f"pool-{args.agent}.jsonl"
    code = hashlib.sha256(inspect.getsource(measure).encode()).hexdigest()  # the report measures nothing
    stamp = hashlib.sha256((optimizers.fingerprint(bench, data, row="search", seed=args.seed) + code).encode()
                           ).hexdigest()[:16]
    kept = {row["candidate"]: row for row in read_lines(kept_file) if row.get("fingerprint") == stamp}
    rosetta = rosetta_rows(results / f"optimizers-{args.agent}.jsonl", bench, data)
    if args.report:
        return {"candidates": [kept[c] for c in sorted(kept)], "rosetta": rosetta, "pool": None}

    # the race's own set-up, in a throwaway study: the same space, candidates and dev order as the race's
    # (a journal named by URL: not the project's own, so nothing to seal; the storage is not in the identity)
    with tempfile.TemporaryDirectory() as state:
        settings = SearchSettings(max_calls=args.max_calls, seed=args.seed, proposer=optimizers.MODEL,
                                  storage=f"journal:{state}/study.journal")
        search = _Search(context.agent, signature, model, adapter, data, metric, settings,
                         EvalCache(Path(state) / "setup.sqlite"), None, None)
        name = study_name(signature.name, model.id, {**settings.identity(), "space": SPACE_VERSION})
        search.set_up(name, Path(state) / "study.journal", None, fresh=True)
    setup_calls = search.budget.calls
    render_code = optimizers.fingerprint(bench, data, row="render", seed=None)
    test_cache = EvalCache(results / f"{args.agent}-test-answers-{render_code}.sqlite")
    dev_cache = EvalCache(results / f"{args.agent}-pool-dev-answers-{render_code}.sqlite")
    label_of = label_function(signature)
    dev_labels = [str(label_of(row.output)) if label_of else "" for row in search.dev]
    pool = len(search.candidates)
    print(f"{args.agent}: a pool of {pool} candidates (seed {args.seed}, --max-calls {args.max_calls}; set-up "
          f"{setup_calls} calls), each on {len(search.dev)} dev and {len(data.test)} test rows; {len(kept)} kept",
          file=sys.stderr)
    if args.dry_run:
        left = [c for c in range(pool) if c not in kept]
        print(f"  kinds: {', '.join(search.space.kind(p) for p in search.candidates)}\n  to measure: {len(left)} "
              f"candidates, at most {len(left) * (len(search.dev) + len(data.test))} calls (cached answers are free)",
              file=sys.stderr)
        return {"candidates": [kept[c] for c in sorted(kept)], "rosetta": rosetta, "pool": pool}
    for index, params in enumerate(search.candidates):
        if index in kept:
            continue
        started = time.monotonic()
        prompt = search.render(search.searchable, search.space.knobs(params))
        dev = Evaluator(context.agent, metric, dev_cache, Budget(), label=search.evaluator.label
                        ).race_scores(prompt, search.dev)
        answers = Evaluator(context.agent, metric, test_cache, Budget()).answers(prompt, data.test)
        test = [metric.score(a.data, e.output, valid=a.valid) for a, e in zip(answers, data.test, strict=True)]
        row = {"agent": args.agent, "seed": args.seed, "max_calls": args.max_calls, "candidate": index,
               "kind": search.space.kind(params), "anchor": index in search.anchors, "params": params,
               "dev_ids": [row.id for row in search.dev], "dev_labels": dev_labels,
               "screening": search.screening, "dev_race": [s.race for s in dev], "dev_plain": [s.plain for s in dev],
               "test": test, "wall_s": round(time.monotonic() - started, 1), "fingerprint": stamp,
               "measured_at": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}
        kept[index] = row
        kept_file.parent.mkdir(parents=True, exist_ok=True)
        with kept_file.open("a", encoding="utf-8") as out:  # one line per candidate: a kill loses one at most
            out.write(json.dumps(row, default=str) + "\n")
        print(f"  candidate {index + 1}/{pool} ({row['kind']}): dev {statistics.fmean(row['dev_plain']):.3f}, "
              f"test {statistics.fmean(test):.3f}, {row['wall_s']:.0f}s", file=sys.stderr)
    return {"candidates": [kept[c] for c in sorted(kept)], "rosetta": rosetta, "pool": pool}


def read_lines(path: Path) -> list[dict]:
    """The JSON lines of ``path`` (a line torn by a kill mid-write is skipped: measured again)."""
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def kept_pool(path: Path) -> list[dict]:
    """The candidates of the last measurement kept at ``path`` (its fingerprint), one per candidate,
    in candidate order: what ``bench/race_rungs.py --pool`` replays."""
    lines = read_lines(path)
    stamp = lines[-1].get("fingerprint") if lines else None
    pool = {line["candidate"]: line for line in lines if line.get("fingerprint") == stamp}
    return [pool[c] for c in sorted(pool)]


def rosetta_rows(path: Path, bench: argparse.Namespace, data: object) -> dict[int, list[float]]:
    """rosetta's artifact's per-row test scores by seed, from ``bench/optimizers.py``'s kept rows
    (``path``) measured under the code now (its fingerprint for each seed)."""
    rows = [row for row in read_lines(path) if row.get("name") == "rosetta" and row.get("per_row")]
    # a fingerprint hashes every source file: once per seed, not once per kept row
    stamps = {seed: optimizers.fingerprint(bench, data, row="search", seed=seed)
              for seed in {row.get("seed") for row in rows}}
    return {row["seed"]: row["per_row"] for row in rows if row.get("fingerprint") == stamps[row.get("seed")]}


def oracle(candidates: list[dict], folds: int = 2) -> tuple[float, list[int]]:
    """The pool's best on one half of test, scored on the other, halves swapped and averaged (the
    halves as ``bench/optimizers.py``'s oracle draws them); and the candidates chosen."""
    size = len(candidates[0]["test"])
    if size < folds:  # a smoke run's one test row: nothing to choose on
        return float("nan"), []
    order = list(range(size))
    random.Random(79).shuffle(order)
    halves = [order[fold::folds] for fold in range(folds)]
    scores, chosen = [], []
    for fold, held in enumerate(halves):
        chosen_on = [i for other, half in enumerate(halves) if other != fold for i in half]
        best = max(candidates, key=lambda c: (statistics.fmean(c["test"][i] for i in chosen_on), -c["candidate"]))
        scores.append(statistics.fmean(best["test"][i] for i in held))
        chosen.append(best["candidate"])
    return statistics.fmean(scores), chosen


def print_report(found: dict[str, dict]) -> None:
    print("\nthe search's pool, every candidate on all of dev and test (seed 0's pool at --max-calls 150):")
    print(f"{'agent':<18} {'pool':>9} {'prior test':>10} {'dev-best: dev':>13} {'test':>6} {'oracle':>7} "
          f"{'rosetta':>8} {'oracle − rosetta':>16}")
    for agent, result in found.items():
        candidates = result["candidates"]
        if not candidates:
            print(f"{agent:<18} — nothing measured yet")
            continue
        done = f"{len(candidates)}" + (f"/{result['pool']}" if result["pool"] else "")
        prior = prior_of(candidates)
        best = max(candidates, key=lambda c: (statistics.fmean(c["dev_plain"]), c["candidate"] == prior["candidate"],
                                              -c["candidate"]))
        value, chosen = oracle(candidates)
        ours = [statistics.fmean(scores) for scores in result["rosetta"].values()]
        mine = statistics.fmean(ours) if ours else float("nan")
        print(f"{agent:<18} {done:>9} {statistics.fmean(prior['test']):>10.3f} "
              f"{statistics.fmean(best['dev_plain']):>13.3f} {statistics.fmean(best['test']):>6.3f} {value:>7.3f} "
              f"{mine:>8.3f} {value - mine:>+16.3f}   chose {' / '.join(kind_of(candidates, c) for c in chosen)}")
    print("\nthe pool by its demos' kind (a knob variant counted with its demos; dev and test: mean and best):")
    print(f"{'agent':<18} {'demos':<18} {'n':>3} {'with knobs':>10} {'dev mean':>8} {'best':>6} {'test mean':>9} "
          f"{'best':>6}")
    for agent, result in found.items():
        kinds: dict[str, list[dict]] = {}
        for candidate in result["candidates"]:
            kinds.setdefault(demos_of(candidate), []).append(candidate)
        for kind, members in sorted(kinds.items(), key=lambda item: -max(statistics.fmean(c["test"])
                                                                          for c in item[1])):
            dev = [statistics.fmean(c["dev_plain"]) for c in members]
            test = [statistics.fmean(c["test"]) for c in members]
            knobs = sum(" + " in c["kind"] for c in members)
            print(f"{agent:<18} {kind:<18} {len(members):>3} {knobs:>10} {statistics.fmean(dev):>8.3f} "
                  f"{max(dev):>6.3f} {statistics.fmean(test):>9.3f} {max(test):>6.3f}")


def prior_of(candidates: list[dict]) -> dict:
    """The race's prior: of the seeded candidates that answer all of dev first (the anchors), the best
    on the screening rows, the first on a tie."""
    anchors = [c for c in candidates if c["anchor"]] or candidates[:1]
    return max(anchors, key=lambda c: (statistics.fmean(c["dev_plain"][:c["screening"]]), -c["candidate"]))


def demos_of(candidate: dict) -> str:
    """The kind of a candidate's demos (a knob variant's suffix dropped)."""
    return str(candidate["kind"]).split(" + ")[0]


def kind_of(candidates: list[dict], index: int) -> str:
    return next(f"{c['candidate']} ({c['kind']})" for c in candidates if c["candidate"] == index)


if __name__ == "__main__":
    main()
