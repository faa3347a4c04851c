"""``<model>.rollout.yaml``: which version of an artifact is active and which experiment runs.

::

    active: 3f5c1a2b9d0e...            # a version id (content_sha256, or a unique prefix)
    experiment:                         # optional
      id: terse-instructions            # seeds the assignment: a new id reshuffles users
      treatment: 9a8b7c6d5e4f...        # the version a share of users gets
      share: 0.2                        # 0.0-1.0
      metric: success                   # success | valid | score | latency_s | cost_usd
      test: z                           # z (rates) | welch; default: z for rates, welch for means
      alpha: 0.05
      min_samples: 100                  # per arm, before anything is decided
      auto_promote: false               # `rosetta experiment report` promotes when the rule holds
      restore: 5e6f7a8b...              # set when the control is not what served before the experiment:
                                        # `rosetta experiment stop` makes this version active again

Frozen dataclasses validated by hand rather than pydantic models: the runtime reads this file on
the path that picks a prompt, which must not import pydantic (see project.py, which reads
``[tool.rosetta]`` the same way). :func:`parse_rollout` reports every problem with its line;
:func:`load_rollout` is the tolerant reader the runtime uses, keeping whatever part still works.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from rosetta.errors import DefinitionError, Location, Problem, RolloutError

METRICS = {"success": "rate", "valid": "rate", "score": "mean", "latency_s": "mean", "cost_usd": "mean"}
"""What an experiment can be decided on, and whether it is a rate (0/1 per call) or a mean."""
LOWER_IS_BETTER = frozenset({"latency_s", "cost_usd"})
TESTS = ("z", "welch")
MAX_BYTES = 64 * 1024
"""A rollout file is a few lines; anything longer is not one rosetta wrote."""
_EXPERIMENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_HEADER = ("# rosetta rollout: the active version of this artifact and the experiment running on it.\n"
           "# Written by `rosetta experiment start|promote|stop`; ids are content_sha256 (`rosetta versions`).\n")


def default_test(metric: str) -> str:
    """z for rates, Welch's t for means."""
    return "z" if METRICS.get(metric) == "rate" else "welch"


@dataclass(frozen=True)
class Experiment:
    """An A/B test: ``share`` of users get ``treatment``, the rest the active version."""

    id: str
    treatment: str  # a version id
    share: float
    metric: str = "success"
    test: str = "z"
    alpha: float = 0.05
    min_samples: int = 100  # per arm
    auto_promote: bool = False
    restore: str | None = None  # what served before, when the control differs from it: `stop` goes back to it

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "treatment": self.treatment, "share": self.share, "metric": self.metric,
                "test": self.test, "alpha": self.alpha, "min_samples": self.min_samples,
                "auto_promote": self.auto_promote, **({"restore": self.restore} if self.restore else {})}


@dataclass(frozen=True)
class Rollout:
    """The content of one rollout file."""

    active: str  # a version id
    experiment: Experiment | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"active": self.active}
        if self.experiment is not None:
            data["experiment"] = self.experiment.to_dict()
        return data


def dump_rollout(rollout: Rollout) -> str:
    """The file's text: a comment saying what it is, then the settings."""
    from rosetta.yaml_text import dump_yaml

    return _HEADER + dump_yaml(rollout.to_dict())


def parse_rollout(text: str, *, path: str) -> Rollout:
    """A valid rollout, or :class:`RolloutError` listing every problem with its line."""
    rollout, problems = _parse(text, path)
    if problems or rollout is None:
        raise RolloutError(problems)
    return rollout


def _read(path: Path) -> str:
    """The rollout file ``compiled/<agent>/<provider>/<model>.rollout.yaml``, read as a trusted file of
    its tree: a symlink on the way, a FIFO or a device is refused, never followed or waited on."""
    from rosetta.fileio import read_trusted

    return read_trusted(path, path.parents[2], limit=MAX_BYTES)


def read_rollout(path: Path) -> Rollout | None:
    """The rollout in ``path`` (strict), or None when there is no file."""
    try:
        text = _read(path)
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise RolloutError(Problem(f"cannot read the rollout file: {exc}", Location(str(path)),
                                   hint="fix or delete it")) from None
    return parse_rollout(text, path=str(path))


def load_rollout(path: Path) -> tuple[Rollout | None, list[Problem]] | None:
    """Tolerant reading for the runtime: None when there is no file; else what can still be used
    (the active version without an experiment that does not parse, or nothing) and the problems."""
    try:
        text = _read(path)
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        return None, [Problem(f"cannot read the rollout file: {exc}", Location(str(path)))]
    return _parse(text, str(path))


def _parse(text: str, path: str) -> tuple[Rollout | None, list[Problem]]:
    from rosetta.definition.yaml_source import parse_yaml

    try:
        data, sources = parse_yaml(text, file=path)
    except DefinitionError as error:
        return None, list(error.problems)
    if not isinstance(data, dict):
        return None, [Problem("a rollout file is a mapping with `active:` and optionally `experiment:`",
                              Location(path), hint="see `rosetta experiment start --help`")]
    problems: list[Problem] = []

    def problem(key: tuple[str, ...], message: str, expected: str | None = None, hint: str | None = None) -> None:
        problems.append(Problem(message, sources.locate(key), ".".join(key), expected, hint))

    for key in sorted(str(k) for k in set(data) - {"active", "experiment"}):
        problem((key,), "unknown setting", "active or experiment")
    active = data.get("active")
    if not _is_id(active):
        problem(("active",), "missing" if active is None else f"{active!r} is not a version id",
                "a version id (hex digits of a content_sha256)", "`rosetta versions AGENT --model M` lists them")
        return None, problems
    active = active.strip().lower()
    raw = data.get("experiment")
    if raw is None:
        return Rollout(active), problems
    before = len(problems)
    experiment = _parse_experiment(raw, problem)
    if experiment is not None and experiment.treatment == active:
        problem(("experiment", "treatment"), "the treatment is the active version", "another version id")
    return Rollout(active, experiment if len(problems) == before else None), problems


def make_experiment(settings: dict[str, Any]) -> Experiment:
    """An :class:`Experiment` from settings given as options (``--share`` ...), checked exactly as
    the file's ``experiment:`` section is; raises :class:`RolloutError` naming each bad option."""
    problems: list[Problem] = []

    def problem(key: tuple[str, ...], message: str, expected: str | None = None, hint: str | None = None) -> None:
        problems.append(Problem(message, field="--" + key[-1].replace("_", "-"), expected=expected, hint=hint))

    experiment = _parse_experiment(settings, problem)
    if problems or experiment is None:
        raise RolloutError(problems or [Problem("the experiment settings are not usable")])
    return experiment


def _parse_experiment(raw: Any, problem: Any) -> Experiment | None:
    if not isinstance(raw, dict):
        problem(("experiment",), "must be a mapping", "{id, treatment, share, ...}")
        return None
    known = ("id", "treatment", "share", "metric", "test", "alpha", "min_samples", "auto_promote", "restore")
    for key in sorted(str(k) for k in set(raw) - set(known)):
        problem(("experiment", key), "unknown setting", ", ".join(known))
    experiment_id, treatment, share = raw.get("id"), raw.get("treatment"), raw.get("share")
    if not isinstance(experiment_id, str) or not _EXPERIMENT_ID.match(experiment_id):
        problem(("experiment", "id"), "missing" if experiment_id is None else f"{experiment_id!r} is not a usable id",
                "1-64 letters, digits, '.', '_' or '-'")
    if not _is_id(treatment):
        problem(("experiment", "treatment"), "missing" if treatment is None else f"{treatment!r} is not a version id",
                "a version id (hex digits of a content_sha256)")
    if not _is_number(share) or not 0.0 <= share <= 1.0:
        problem(("experiment", "share"), "missing" if share is None else f"{share!r} is out of range",
                "a number from 0.0 to 1.0, the treatment's share of users")
    metric = raw.get("metric", "success")
    if not isinstance(metric, str) or metric not in METRICS:
        problem(("experiment", "metric"), f"unknown metric {metric!r}", " | ".join(METRICS))
        metric = "success"
    test = raw.get("test", default_test(metric))
    if not isinstance(test, str) or test not in TESTS:
        problem(("experiment", "test"), f"unknown test {test!r}", "z | welch")
    elif test == "z" and METRICS[metric] != "rate":
        problem(("experiment", "test"), f"the z-test compares rates; {metric} is a mean", "welch",
                "use Welch's t-test for score, latency_s and cost_usd")
    alpha = raw.get("alpha", 0.05)
    if not _is_number(alpha) or not 0.0 < alpha < 1.0:
        problem(("experiment", "alpha"), f"{alpha!r} is out of range", "a number between 0 and 1, e.g. 0.05")
    min_samples = raw.get("min_samples", 100)
    if isinstance(min_samples, bool) or not isinstance(min_samples, int) or min_samples < 2:
        problem(("experiment", "min_samples"), f"{min_samples!r} is not a usable count",
                "an integer of at least 2, per arm")
    auto_promote = raw.get("auto_promote", False)
    if not isinstance(auto_promote, bool):
        problem(("experiment", "auto_promote"), f"{auto_promote!r} is not a boolean", "true or false")
    restore = raw.get("restore")
    if restore is not None and not _is_id(restore):
        problem(("experiment", "restore"), f"{restore!r} is not a version id",
                "a version id (hex digits of a content_sha256)")
    if not (isinstance(experiment_id, str) and _is_id(treatment) and _is_number(share) and _is_number(alpha)
            and isinstance(min_samples, int)):
        return None  # each reason is among the problems
    return Experiment(experiment_id, treatment.strip().lower(), float(share), metric, str(test), float(alpha),
                      min_samples, bool(auto_promote), restore.strip().lower() if _is_id(restore) else None)


def _is_id(value: Any) -> TypeGuard[str]:
    return isinstance(value, str) and re.fullmatch(r"[0-9a-fA-F]{7,64}", value.strip()) is not None


def _is_number(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
