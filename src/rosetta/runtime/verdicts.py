"""What a judge said of an answer, criterion by criterion, and the verdict rosetta derives from it
(:mod:`rosetta.runtime.review` asks the judge). Their own module, below :mod:`~rosetta.runtime.result`,
so that a Result can name its Review without importing the reviewer and the runtime behind it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rosetta.runtime.rubric import Rubric

CREDIT = {"pass": 1.0, "fail": 0.0, "indeterminate": 0.5}
VERDICTS = ("pass", "fail", "indeterminate")


@dataclass(frozen=True)
class CriterionVerdict:
    id: str
    text: str
    verdict: str  # pass | fail | indeterminate
    reasoning: str = ""
    confidence: float | None = None


@dataclass
class Review:
    """What the judge said, criterion by criterion, and the verdict rosetta derives from it."""

    criteria: list[CriterionVerdict]
    issues: list[str] = field(default_factory=list)
    suggested_fixes: list[str] = field(default_factory=list)
    judge_valid: bool = True  # the judge's answer validated against its schema
    model: str = ""
    calls: int = 0
    weights: dict[str, float] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        verdicts = [c.verdict for c in self.criteria]
        if "fail" in verdicts:
            return "fail"
        return "pass" if verdicts and all(v == "pass" for v in verdicts) else "indeterminate"

    @property
    def passed(self) -> bool:
        """No criterion failed (indeterminate ones do not fail a review)."""
        return self.verdict != "fail"

    @property
    def score(self) -> float:
        """Weighted credit: pass 1, indeterminate ½, fail 0."""
        total = sum(self.weights.get(c.id, 1.0) for c in self.criteria)
        gained = sum(self.weights.get(c.id, 1.0) * CREDIT[c.verdict] for c in self.criteria)
        return gained / total if total else 0.0

    @property
    def decided_score(self) -> float | None:
        """Weighted pass share over the criteria the judge decided; None when it decided none (so
        indeterminate verdicts can never fail a threshold on their own)."""
        decided = [c for c in self.criteria if c.verdict != "indeterminate"]
        total = sum(self.weights.get(c.id, 1.0) for c in decided)
        if not decided or not total:
            return None
        return sum(self.weights.get(c.id, 1.0) for c in decided if c.verdict == "pass") / total

    def feedback(self) -> str:
        """The user turn that asks for a revised answer (generate → review → retry)."""
        failed = [f"- {c.id} ({c.text}): {c.reasoning or 'failed'}" for c in self.criteria if c.verdict == "fail"]
        lines = ["A reviewer checked your previous answer against a rubric and it did not pass.", "",
                 "Failed criteria:", *failed]
        if self.issues:
            lines += ["", "Issues:", *[f"- {issue}" for issue in self.issues]]
        if self.suggested_fixes:
            lines += ["", "Suggested fixes:", *[f"- {fix}" for fix in self.suggested_fixes]]
        lines += ["", "Reply again with a complete, corrected answer in the same format."]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        decided = self.decided_score
        return {"verdict": self.verdict, "score": round(self.score, 6),
                "decided_score": None if decided is None else round(decided, 6), "judge_valid": self.judge_valid,
                "model": self.model, "calls": self.calls,
                "criteria": [{"id": c.id, "text": c.text, "verdict": c.verdict, "reasoning": c.reasoning,
                              "confidence": c.confidence} for c in self.criteria],
                "issues": list(self.issues), "suggested_fixes": list(self.suggested_fixes)}


def read_review(data: object, rubric: Rubric, *, valid: bool = True, model: str = "", calls: int = 0) -> Review:
    """A :class:`Review` from the judge's JSON answer; criteria it left out are indeterminate."""
    given: dict[str, dict[str, Any]] = {}
    if isinstance(data, dict):
        for item in data.get("criteria") or []:
            if isinstance(item, dict) and item.get("verdict") in VERDICTS:
                given.setdefault(str(item.get("id", "")).strip().upper(), item)
    verdicts = []
    for criterion in rubric.criteria:
        item = given.get(criterion.id.upper())
        if item is None:
            reason = "the judge gave no verdict for this criterion" if valid else "the judge's answer never validated"
            verdicts.append(CriterionVerdict(criterion.id, criterion.text, "indeterminate", reason, None))
        else:
            confidence = item.get("confidence")
            verdicts.append(CriterionVerdict(criterion.id, criterion.text, item["verdict"],
                                             str(item.get("reasoning") or ""),
                                             float(confidence) if isinstance(confidence, (int, float)) else None))
    issues = [str(i) for i in (data.get("issues") or [])] if isinstance(data, dict) else []
    fixes = [str(i) for i in (data.get("suggested_fixes") or [])] if isinstance(data, dict) else []
    return Review(verdicts, issues, fixes, judge_valid=valid, model=model, calls=calls,
                  weights={c.id: c.weight for c in rubric.criteria})


def unreviewed(rubric: Rubric, reason: str) -> Review:
    """Every criterion indeterminate: the judge could not grade (the answer stands, ungraded)."""
    return Review([CriterionVerdict(c.id, c.text, "indeterminate", reason, None) for c in rubric.criteria],
                  judge_valid=False, weights={c.id: c.weight for c in rubric.criteria})


def failed_review(rubric: Rubric, reason: str) -> Review:
    """Every criterion failed by rule, without asking the judge (there is no usable answer)."""
    return Review([CriterionVerdict(c.id, c.text, "fail", reason, 1.0) for c in rubric.criteria],
                  weights={c.id: c.weight for c in rubric.criteria})
