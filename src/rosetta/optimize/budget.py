"""What a search may spend, decided before its first call: :func:`call_plan` is the one place that
says what a budget allows, so ``--dry-run`` prints exactly what the search then runs, and refuses
exactly what it refuses, in the same words.

``--max-calls`` bounds the search: proposals, bootstrapping and the race, with each answer's
validation retries and a judge's verdicts. The test pass is outside it, on purpose: the winner's
test score is recorded (after every choice, which dev makes) and reproduced by ``rosetta
evaluate``, so it must cover every test row; a budget that cut it short would record
a score comparable with nothing, and reserving its worst case (every answer retried) would take
several test splits' worth of calls from the race. Its size is fixed by the data, so the plan
states it, and its most calls, before any call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rosetta.optimize.evaluation import draws_for
from rosetta.optimize.label_odds import label_field
from rosetta.optimize.metrics import Metric
from rosetta.optimize.race import Plan, plan
from rosetta.optimize.space import anchor_count
from rosetta.optimize.study import SearchSettings, base_model
from rosetta.datasets import LabeledData
from rosetta.errors import Problem, UsageError

if TYPE_CHECKING:
    from rosetta.render.prompt import RenderedPrompt
    from rosetta.signature import Signature


@dataclass(frozen=True)
class CallPlan:
    """The calls one search will make, in answers and in calls at most."""

    max_calls: int | None
    proposals: int  # proposer calls: one per instruction asked (none from a base model)
    bootstrap: int  # train rows the default prompt answers to find bootstrapped demos
    race: Plan | None  # the race as planned, in answers; None: DSPy chooses, with calls of its own
    retries: int  # validation retries one answer may take
    judge: int  # the most calls one judge verdict takes; 0 when the metric calls no model
    test: int  # test answers: the winner's (each row ``draws`` times), the unoptimized render's too with --baseline
    baseline_dev: int  # dev rows the unoptimized render may still answer for its dev score (--baseline)
    room: int | None = None  # answers the race may plan for; None without --max-calls
    halving: bool = True
    dspy_dev: int = 0  # DSPy's choice, scored on every dev row through the runtime
    notes: tuple[str, ...] = ()

    @property
    def per_answer(self) -> int:
        """The most calls one scored answer takes: the answer, its retries, the judge's verdict."""
        return 1 + self.retries + self.judge

    def search_calls(self) -> int | None:
        """At most this many calls before the test pass: the budget when there is one; None when
        DSPy's own calls (which rosetta cannot count ahead) come first."""
        if self.race is None:
            return None
        race = self.race.calls() if self.room is None else self.room  # a plan fitted again stays within the room
        worst = self.proposals + (self.bootstrap + race) * self.per_answer
        return worst if self.max_calls is None else min(worst, self.max_calls)

    def test_calls(self) -> int:
        """At most this many calls for the test pass, outside the budget (with --baseline, the
        unoptimized render's remaining dev rows too)."""
        return (self.test + self.baseline_dev) * self.per_answer

    def fitted(self, candidates: int, anchors: int) -> Plan:
        """The race fitted again to ``candidates`` distinct prompts and ``anchors`` seeded ones the
        prior is chosen from, when the space holds other numbers than the plan's: the same budget,
        fewer candidates in rung 0 and so more in the later rungs."""
        assert self.race is not None
        dev = self.race.rows[-1] + self.race.confirm
        return plan(dev, self.room, candidates, halving=self.halving, anchors=anchors) or self.race


def call_plan(data: LabeledData, settings: SearchSettings, signature: Signature, metric: Metric,
              prompt: RenderedPrompt, *, optimizer: str = "rosetta") -> CallPlan:
    """The plan for searching ``signature`` with ``settings`` on ``data``, ``prompt`` being its
    unoptimized render; a UsageError, before any call, for a budget the search cannot keep."""
    from rosetta.runtime.runner import default_validation_retries

    retries = default_validation_retries(prompt)
    judge = max(1, metric.worst_case_calls()) if metric.needs_model else 0
    tests = len(data.test) * draws_for(prompt, settings.repeats)
    if optimizer != "rosetta":
        return _dspy_plan(optimizer, settings, len(data.dev), retries=retries, judge=judge, test=tests)
    notes: list[str] = []
    base = base_model(settings.proposer) if settings.proposals > 0 else None
    if base:
        notes.append(f"no instruction proposals: {base}")
    proposals = settings.proposals if settings.proposer and not base else 0
    label = label_field(signature, metric)
    bootstrap = min(settings.bootstrap, len(data.train)) if signature.demo_range[1] > 0 and label is None else 0
    if label is not None and settings.bootstrap:
        notes.append("no bootstrapped demos: the answer is only a label")
    halving = settings.pruner != "none"
    room = _room(settings.max_calls, proposals, bootstrap, len(data.dev), retries=retries, judge=judge)
    race = plan(len(data.dev), room, settings.trials, halving=halving,
                anchors=anchor_count(signature, data.train, settings.nearest_demos))
    if race is None:
        raise UsageError(Problem("no dev rows to race on", field="dataset", hint="add rows to the dev split"))
    seeded = "the prior answers" if race.anchors == 1 else \
        f"{race.anchors} seeded prompts, the prior the better of them on the screening rows, answer"
    several = race.keep[0] != 1
    notes.append(f"{seeded} all {race.dev} dev rows; then at most {race.keep[0]} challenger{'s' if several else ''} "
                 f"(fitted again when the space holds fewer distinct prompts) race{'' if several else 's'} on "
                 f"screening rows per rung {list(race.rows)}, keeping {list(race.keep)}, and the best answers the "
                 f"{race.confirm} confirmation rows" + (" (later rungs take more when answers need fewer validation "
                                                          "retries than were kept for them)"
                                                          if retries and settings.max_calls else ""))
    baseline = settings.baseline_test
    return CallPlan(settings.max_calls, proposals, bootstrap, race, retries, judge, tests * (2 if baseline else 1),
                    len(data.dev) if baseline else 0, room=room, halving=halving, notes=tuple(notes))


def _room(max_calls: int | None, proposals: int, bootstrap: int, dev: int, *, retries: int,
          judge: int) -> int | None:
    """Answers the race may plan for: the budget less the setup, and less one answer's worst case
    beyond its plain calls (it starts only when that fits), each answer costing its call and, with
    a judge, one verdict. Refuses a budget that leaves less than one pass over dev."""
    if max_calls is None:
        return None
    plain = 2 if judge else 1
    setup, slack = proposals + bootstrap * plain, retries + max(0, judge - 1)
    left = max(0, max_calls - setup - slack)
    if left // plain < dev:
        verdicts = f", {dev * plain} calls with the judge's verdicts" if judge else ""
        raise UsageError(Problem(
            f"--max-calls {max_calls} leaves {left} calls for the race after setup ({proposals} proposals, "
            f"{bootstrap} bootstrap answers{' and their verdicts' if judge and bootstrap else ''}) and one answer's "
            f"worst case ({slack} calls beyond its own), less than one pass over dev ({dev} rows{verdicts})",
            field="--max-calls", hint=f"allow at least {setup + slack + dev * plain} calls, or shrink dev (the test "
                                      "pass comes on top: it is outside --max-calls)"))
    return left // plain


def _dspy_plan(optimizer: str, settings: SearchSettings, dev: int, *, retries: int, judge: int,
               test: int) -> CallPlan:
    """DSPy's optimizers spend calls of their own, which rosetta neither counts ahead nor bounds: a
    budget would be a promise no one keeps, so it is refused."""
    given = [flag for flag, value in (("--max-calls", settings.max_calls), ("--max-cost", settings.max_cost),
                                      ("--timeout", settings.timeout_s)) if value is not None]
    if given:
        raise UsageError(Problem(f"{' and '.join(given)} cannot bound --optimizer {optimizer}: DSPy makes its own "
                                 "calls, which rosetta neither counts nor stops", field=given[0],
                                 hint="drop the limit, or use --optimizer rosetta, whose search keeps it"))
    return CallPlan(None, 0, 0, None, retries, judge, test, 0, dspy_dev=dev,
                    notes=(f"DSPy {optimizer} makes its own calls first: rosetta cannot count them ahead",))
