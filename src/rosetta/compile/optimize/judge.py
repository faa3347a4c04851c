"""The ``judge`` metric: an LLM grades an answer against binary rubric criteria.

The grader is itself a rosetta agent — the project's ``rubric-reviewer`` (per the rubric review
design: pass / fail / indeterminate per criterion, with reasoning and confidence, schema-validated
like any other answer). A criterion counts 1 when it passes, 0 when it fails and ½ when it is
indeterminate, so an indeterminate verdict never fails an answer on its own; a judge answer that
never validated counts as all-indeterminate.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from rosetta.errors import Location, Problem, UsageError

JUDGE_AGENT = "rubric-reviewer"
CREDIT = {"pass": 1.0, "fail": 0.0, "indeterminate": 0.5}


class RubricJudge:
    """Callable ``(predicted, expected, rubric) -> score``; counts the calls it makes."""

    def __init__(self, root: Path, model: str, *, complete: Any = None) -> None:
        self.root = root
        self.model = model
        self.complete = complete
        self.calls = 0
        self._agent: Any = None
        self._lock = threading.Lock()

    def agent(self) -> Any:
        if self._agent is None:
            from rosetta.runtime.agent import load

            try:
                self._agent = load(JUDGE_AGENT, project=self.root)
            except UsageError:
                raise UsageError(Problem(f"the judge metric needs the {JUDGE_AGENT} agent", Location(str(self.root)),
                                         hint=f"add signatures/{JUDGE_AGENT}.md (rosetta's bundled one is a good "
                                              "start), or choose another metric")) from None
        return self._agent

    def __call__(self, predicted: Any, expected: Any, rubric: list[str]) -> float:
        criteria = "\n".join(f"C{number}: {text}" for number, text in enumerate(rubric, start=1))
        artifact = (f"Answer to grade:\n{_text(predicted)}\n\nReference answer (what a correct answer says):\n"
                    f"{_text(expected)}")
        result = self.agent().run({"artifact": artifact, "rubric": criteria}, model=self.model, fallbacks=[],
                                  complete=self.complete)
        with self._lock:
            self.calls += sum(1 for a in result.attempts if a.outcome in ("ok", "invalid"))
        return score_review(result.data if result.valid else None, len(rubric))


def score_review(review: Any, criteria: int) -> float:
    """Mean credit over the rubric's criteria; missing or unparsable verdicts are indeterminate."""
    verdicts = {}
    if isinstance(review, dict):
        for item in review.get("criteria") or []:
            if isinstance(item, dict):
                verdicts[str(item.get("id", "")).upper()] = item.get("verdict")
    credits = [CREDIT.get(verdicts.get(f"C{number}"), 0.5) for number in range(1, criteria + 1)]
    return sum(credits) / len(credits) if credits else 0.0


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)
