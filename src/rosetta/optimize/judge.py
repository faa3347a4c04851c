"""The ``judge`` metric: an LLM grades an answer against binary rubric criteria.

The grading is :mod:`rosetta.runtime.review` (the project's ``rubric-reviewer`` agent), given the
labeled output as the reference answer. A criterion counts 1 when it passes, 0 when it fails and ½
when it is indeterminate, so an indeterminate verdict never fails an answer on its own; a judge
answer that never validated counts as all-indeterminate.
"""

from __future__ import annotations

from typing import Any

from rosetta.runtime.review import Reviewer


class RubricJudge(Reviewer):
    """Callable ``(predicted, expected, rubric) -> score``; counts the calls it makes."""

    def __call__(self, predicted: object, expected: object, rubric: list[Any]) -> float:
        return self.review(predicted, rubric, reference=expected).score
