"""Who gets which version: sticky assignment from a hash, with no server state.

A user is in the treatment arm of experiment ``E`` iff ``sha256(f"{E}:{user}")``, read as a 256-bit
integer and divided by 2**256, is below the experiment's share. The same user therefore always
lands in the same arm (in every process, on every machine), arms are independent across
experiments, and raising the share only moves users from control to treatment, never back.
Calls without a user id are not part of the experiment: they get the active version.

:func:`read_pins` turns a rollout file into verified artifacts for the runtime. Whatever is wrong
with the file never breaks a call: the part that cannot be used is dropped (an experiment whose
settings or treatment are bad, or the whole file when the active version is) and the problems
are returned for the runtime to log.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rosetta.errors import Location, Problem, RolloutError
from rosetta.store.artifact import Artifact
from rosetta.store.pins import Experiment, load_rollout
from rosetta.store.versions import known_ids, load_version, rollout_path, short_id

CONTROL = "control"
TREATMENT = "treatment"


def bucket(experiment_id: str, user_id: object) -> float:
    """The user's position in [0, 1) for this experiment: uniform, and the same on every call."""
    digest = hashlib.sha256(f"{experiment_id}:{user_id}".encode()).digest()
    return int.from_bytes(digest, "big") / 2**256


def assign(experiment_id: str, user_id: object, share: float) -> str:
    """``"treatment"`` for the ``share`` of users whose bucket is below it, else ``"control"``."""
    return TREATMENT if bucket(experiment_id, user_id) < share else CONTROL


@dataclass(frozen=True)
class Route:
    """What one (agent, model) serves. Outside an experiment (or without a user id) everyone gets
    ``active``; during one, each user gets ``control`` or ``treatment`` by bucket. The three are
    the runtime's selections, built once, so picking one costs a hash and no I/O."""

    active: Any
    experiment: Experiment | None = None
    control: Any = None
    treatment: Any = None

    def pick(self, user_id: object | None) -> Any:
        if self.experiment is None or user_id is None:
            return self.active
        return self.treatment if assign(self.experiment.id, user_id, self.experiment.share) == TREATMENT \
            else self.control


@dataclass(frozen=True)
class Pins:
    """The versions a rollout file pins, verified, and why any part of it was ignored."""

    file: Path
    active: tuple[Artifact, Path] | None = None  # None: serve as if there were no rollout file
    experiment: Experiment | None = None  # None: no experiment, or one that cannot run
    treatment: tuple[Artifact, Path] | None = None
    problems: tuple[Problem, ...] = field(default_factory=tuple)
    current: str | None = None  # the id of the artifact file itself (what `rosetta compile` wrote last)

    def explain_problems(self) -> str:
        """One line for the log: what is wrong and what is served instead."""
        if self.active is None:
            instead = "serving the compiled artifact as if there were no rollout file"
        elif self.experiment is not None:
            instead = "ignoring only that"
        else:
            instead = f"serving the active version {short_id(self.active[0].content_sha256)} without an experiment"
        said = [p.format().split("\n")[0] + (f" (hint: {p.hint})" if p.hint else "") for p in self.problems]
        return "; ".join(said) + f"; {instead}"


def read_pins(artifact: Path, *, agent: str, model: str) -> Pins | None:
    """The versions pinned beside ``artifact`` for ``agent`` on ``model``; None without a rollout file."""
    file = rollout_path(artifact)
    loaded = load_rollout(file)
    if loaded is None:
        return None
    rollout, problems = loaded
    if rollout is None:
        return Pins(file, problems=tuple(problems))
    where = Location(str(file))
    current = next((full for full, path in known_ids(artifact).items() if path == artifact), None)
    try:
        active = load_version(artifact, rollout.active, agent=agent, model=model, where=where, field_name="active")
    except RolloutError as error:
        return Pins(file, problems=(*problems, *error.problems), current=current)
    experiment = rollout.experiment
    if experiment is None:
        return Pins(file, active, problems=tuple(problems), current=current)
    try:
        treatment = load_version(artifact, experiment.treatment, agent=agent, model=model, where=where,
                                 field_name="experiment.treatment")
    except RolloutError as error:
        return Pins(file, active, problems=(*problems, *error.problems), current=current)
    if treatment[0].content_sha256 == active[0].content_sha256:
        problems.append(Problem("the treatment is the active version", where, "experiment.treatment",
                                "another version id"))
        return Pins(file, active, problems=tuple(problems), current=current)
    return Pins(file, active, experiment, treatment, tuple(problems), current)
