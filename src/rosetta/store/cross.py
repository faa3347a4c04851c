"""``compiled/<agent>/cross.yaml``: the cross-model matrix ``rosetta evaluate --cross`` measured —
each model's prompt sent as is to every model and scored on a labeled split — kept where the
runtime's fallback reads it.

The runtime asks it one question (:meth:`CrossRecord.hurts`), and only of a matrix measured on dev
(a test matrix is for the report: test chooses nothing): a model has no artifact of its own
and another model's could stand in; did that very artifact (by its content sha256) score lower on
this model than the model's own uncompiled render? Then it is not lent. A record measured on
another artifact says nothing about this one, and a file that does not parse is ignored, saying
why: the record can only keep a borrowed prompt from serving, never choose one.

Validated by hand, like the rollout files (:mod:`rosetta.store.pins`): the runtime reads it on the
path that picks a prompt, which must not import pydantic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FILE = "cross.yaml"
UNCOMPILED = "uncompiled"
"""The matrix's row of each model's own uncompiled render."""
MAX_BYTES = 256 * 1024
_HEADER = ("# rosetta cross-model matrix: each model's prompt (rows) sent as is to each model (columns), scored.\n"
           "# Written by `rosetta evaluate --cross`; measured on dev, it keeps the runtime from lending a model's\n"
           "# artifact to another model on which it scored below that model's own uncompiled render.\n")


@dataclass(frozen=True)
class CrossRecord:
    """One measured matrix of one agent."""

    agent: str
    split: str
    metric: str
    examples: int
    dataset_sha256: str
    measured_at: str  # UTC, ISO 8601
    prompts: dict[str, str | None]  # row model → content_sha256 of the artifact scored (None: an uncompiled render)
    scores: dict[str, dict[str, float]]  # row (a model, or UNCOMPILED) → column model → score

    def to_dict(self) -> dict[str, Any]:
        return {"agent": self.agent, "split": self.split, "metric": self.metric, "examples": self.examples,
                "dataset_sha256": self.dataset_sha256, "measured_at": self.measured_at, "prompts": self.prompts,
                "scores": self.scores}

    def hurts(self, lender: str, borrower: str, artifact_sha: str) -> str | None:
        """Why ``lender``'s artifact (``artifact_sha``) must not serve ``borrower``, or None when the
        matrix does not say it scored below ``borrower``'s own uncompiled render there."""
        if self.split != "dev" or self.prompts.get(lender) != artifact_sha:
            return None  # test is scored for the report and chooses nothing; another artifact's record says nothing
        lent, own = self.scores.get(lender, {}).get(borrower), self.scores.get(UNCOMPILED, {}).get(borrower)
        if lent is None or own is None or lent >= own:
            return None
        return (f"the cross-model matrix ({FILE}: {self.metric} on {self.examples} {self.split} examples, "
                f"{self.measured_at}) scores this artifact {lent:.3f} on {borrower}, below {borrower}'s own "
                f"uncompiled render ({own:.3f})")


def cross_path(compiled_dir: Path, agent: str) -> Path:
    return compiled_dir / agent / FILE


def dump_cross(record: CrossRecord) -> str:
    from rosetta.yaml_text import dump_yaml

    return _HEADER + dump_yaml(record.to_dict())


def read_cross(compiled_dir: Path, agent: str) -> CrossRecord | str | None:
    """The agent's recorded matrix; None when there is none; why it cannot be used when it is
    unreadable or malformed (read as a trusted file of the tree: no symlink, FIFO or device)."""
    from rosetta.errors import DefinitionError
    from rosetta.fileio import read_trusted

    path = cross_path(compiled_dir, agent)
    try:
        text = read_trusted(path, compiled_dir, limit=MAX_BYTES)
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        return f"{FILE} is unreadable ({exc})"
    from rosetta.definition.yaml_source import parse_yaml

    try:
        data, _ = parse_yaml(text, file=str(path))
        return _record(data, agent)
    except DefinitionError as error:
        return f"{FILE} is not valid YAML ({error.problems[0].message})"
    except (KeyError, TypeError, ValueError) as exc:
        return f"{FILE} is not a cross-model record ({exc})"


def _record(data: Any, agent: str) -> CrossRecord:
    """A CrossRecord from parsed YAML; KeyError, TypeError or ValueError naming what is wrong."""
    if not isinstance(data, dict):
        raise TypeError("expected a mapping")
    if data["agent"] != agent:
        raise ValueError(f"it is {data['agent']!r}'s, not {agent!r}'s")
    texts = {key: data[key] for key in ("split", "metric", "dataset_sha256", "measured_at")}
    if not all(isinstance(value, str) for value in texts.values()):
        raise TypeError("split, metric, dataset_sha256 and measured_at are text")
    examples, prompts, scores = data["examples"], data["prompts"], data["scores"]
    if not isinstance(examples, int) or isinstance(examples, bool) or examples < 1:
        raise ValueError("examples: expected a positive whole number")
    if not isinstance(prompts, dict) or not all(isinstance(m, str) and (s is None or isinstance(s, str))
                                                for m, s in prompts.items()):
        raise TypeError("prompts: expected model → content_sha256 (or null)")
    if not isinstance(scores, dict) or not all(
            isinstance(row, dict) and all(isinstance(c, str) and _score(v) for c, v in row.items())
            for row in scores.values()):
        raise TypeError("scores: expected row → column model → a score in [0, 1]")
    return CrossRecord(agent, texts["split"], texts["metric"], examples, texts["dataset_sha256"],
                       texts["measured_at"], dict(prompts), {str(r): dict(v) for r, v in scores.items()})


def _score(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
        and 0.0 <= value <= 1.0
