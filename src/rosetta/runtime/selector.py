"""Which prompt a model gets, and why: exact artifact ▸ family ▸ provider ▸ uncompiled render.

An artifact is used only when the store has verified it (see :mod:`rosetta.store.lookup`: it is
this agent's, for this model, sealed, and built from inputs that hash the same now; in strict mode,
also what its definition and labeled data render to now, which holds for pinned versions too); every fallback is logged once per (agent, model) with its
reason, and ``strict`` turns fallbacks into errors. A ``<model>.rollout.yaml`` beside the exact model's artifact pins which
version serves and may run an experiment: each user then gets the control or the treatment version,
always the same one (see :mod:`rosetta.store.routing`). A rollout file that cannot be used is logged
and ignored, never fatal (except in strict mode).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rosetta.errors import Location, Problem, RolloutError, UsageError
from rosetta.project import ProjectDirs
from rosetta.providers.catalog import CatalogModel, catalog_for
from rosetta.render.prompt import RenderedPrompt
from rosetta.store.artifact import ArtifactError
from rosetta.store.lookup import Shelf
from rosetta.store.routing import Route
from rosetta.store.versions import short_id

log = logging.getLogger("rosetta.runtime")


@dataclass(frozen=True)
class Selection:
    """Which prompt the runtime uses for a model, and why."""

    model: str
    kind: str  # "artifact" | "family" | "provider" | "uncompiled"
    artifact: str | None
    reason: str
    prompt: RenderedPrompt
    artifact_id: str = ""  # the artifact's content_sha256, or "fallback: <reason>"
    version: str | None = None  # the content_sha256 of the artifact used; None for the uncompiled render
    arm: str | None = None  # "control" | "treatment" when an experiment routed the caller
    experiment: str | None = None  # that experiment's id


class Selector:
    """Picks (and caches) one agent's prompt per model."""

    def __init__(self, name: str, definition_path: Path | None, dirs: ProjectDirs, strict: bool) -> None:
        self.name, self.definition_path, self.dirs, self.strict = name, definition_path, dirs, strict
        self.shelf = Shelf(dirs, name)
        self._routes: dict[tuple[str, bool], Route] = {}

    def select(self, model: str, strict: bool | None = None, user_id: object | None = None) -> Selection:
        """The selection for ``model`` (cached): during an experiment, the one of ``user_id``'s arm."""
        key = (model, self.strict if strict is None else strict)
        route = self._routes.get(key)
        if route is None:
            route = self._routes[key] = self.route(model, key[1])
        return route.pick(user_id)

    def route(self, model: str, strict: bool) -> Route:
        """What ``model`` serves (not cached): the versions its rollout file pins, else :meth:`choose`."""
        target = self.target(model)
        pins = self.shelf.pins(target.id)
        if pins is not None and pins.problems:
            if strict:
                raise RolloutError([*pins.problems, Problem(f"{self.name} on {target.id}: the rollout file cannot be "
                                                            "used", Location(str(pins.file)),
                                                            hint="fix it, or load without strict=True to ignore it")])
            log.warning("%s on %s: %s", self.name, target.id, pins.explain_problems())
        if pins is None or pins.active is None:
            return Route(self.choose(target, strict))
        if strict:  # a pinned version is served only if it is what the sources render now, as any artifact is
            for _, path in (pins.active, pins.treatment or pins.active):
                why = self.shelf.reproduced(path, self.definition_path)
                if why is not None:
                    raise RolloutError(Problem(f"{self.name} on {target.id}: {pins.file.name} pins {path.name}, "
                                               f"which strict mode cannot serve: {why}", Location(str(path)),
                                               hint="promote a version compiled from the current definition, or "
                                                    "load without strict=True"))
        return _pinned_route(target, pins)

    def target(self, model: str) -> CatalogModel:
        """The catalog entry of ``model``; an id outside the catalog only if the project accepts it,
        and never a retired one (the error names its replacement)."""
        catalog = catalog_for(self.dirs.root, self.dirs.models)
        target = catalog.resolve(model, unlisted=self.dirs.unlisted_models)
        catalog.refuse_retired(target)
        return target

    def choose(self, target: CatalogModel, strict: bool) -> Selection:
        """The artifact for the exact model, its family or provider, else the uncompiled render.
        Another model's artifact stands in only if it was rendered by the same adapter for the same
        prompt style: a chat endpoint never gets a base model's completion prompt."""
        reasons: list[str] = []
        for kind, model_id, path in self._candidates(target):
            artifact = self.shelf.verified(path)
            if not isinstance(artifact, str) and strict:
                artifact = self.shelf.reproduced(path, self.definition_path) or artifact
            if not isinstance(artifact, str) and kind != "artifact":
                artifact = _unlike(artifact, target) or artifact
            if isinstance(artifact, str):
                reasons.append(f"{path.name} for {model_id}: {artifact}")
                continue
            if kind == "artifact":
                return Selection(target.id, kind, str(path), "compiled artifact for this model", artifact.prompt,
                                 artifact.content_sha256, artifact.content_sha256)
            reason = (f"no usable artifact for {target.id}"
                      + (f" ({'; '.join(reasons)})" if reasons else "") + f"; using the {kind} artifact for {model_id}")
            self._fallback(target.id, reason, strict)
            return Selection(target.id, kind, str(path), reason, retarget(artifact.prompt, target),
                             artifact.content_sha256, artifact.content_sha256)
        reason = (f"no usable compiled artifact for {target.id}" + (f" ({'; '.join(reasons)})" if reasons else "")
                  + "; rendering the definition uncompiled")
        self._fallback(target.id, reason, strict)
        return Selection(target.id, "uncompiled", None, reason, self.render_uncompiled(target),
                         f"fallback: {reason}")

    def render_uncompiled(self, target: CatalogModel) -> RenderedPrompt:
        """The definition rendered for ``target`` now, with no artifact."""
        if self.definition_path is None:
            raise UsageError(Problem(f"{self.name}: no definition found to render for {target.id}",
                                     Location(str(self.dirs.signatures_dir)),
                                     hint="load the agent by path, or compile it for this model"))
        from rosetta.definition.loader import load_definition
        from rosetta.render.renderer import render
        from rosetta.signature import lower

        return render(lower(load_definition(self.definition_path, root=self.dirs.root)), target)

    def _candidates(self, target: CatalogModel) -> list[tuple[str, str, Path]]:
        names = catalog_for(self.dirs.root, self.dirs.models).names()
        exact, family, provider = [], [], []
        for model_id, path in sorted(self.shelf.artifacts.items()):
            if model_id == target.id:
                exact.append(("artifact", model_id, path))
                continue
            other = names.get(model_id.lower())
            if other is not None and other.family == target.family:
                family.append(("family", model_id, path))
            elif model_id.split("/", 1)[0] == target.provider:
                provider.append(("provider", model_id, path))
        return exact + family + provider

    def _fallback(self, model: str, reason: str, strict: bool) -> None:
        if strict:
            raise ArtifactError(Problem(f"{self.name} on {model}: {reason}", Location(str(self.dirs.compiled_dir)),
                                        hint="run `rosetta compile`, or load without strict=True to allow fallbacks"))
        log.warning("%s on %s: %s", self.name, model, reason)


def _unlike(artifact: Any, target: CatalogModel) -> str | None:
    """Why another model's ``artifact`` cannot stand in for ``target`` (None: it can)."""
    completion = artifact.prompt.system_placement.value == "completion"
    if completion != (target.prompt_style == "completion"):
        style = "completion-style prompt for a base model" if completion else "chat prompt"
        return f"skipped, a {style}; {target.id} takes {target.prompt_style} prompts"
    if artifact.adapter != target.adapter:
        return f"skipped, rendered by the {artifact.adapter} adapter; {target.id} uses {target.adapter}"
    return None


def _pinned_route(target: CatalogModel, pins: Any) -> Route:
    """The route a rollout file pins: its active version, and an experiment's two arms if one runs."""
    served, path = pins.active
    reason = f"version {short_id(served.content_sha256)} is active in {pins.file.name}"
    if pins.current not in (None, served.content_sha256) and (
            pins.treatment is None or pins.current != pins.treatment[0].content_sha256):
        reason += (f" (the compiled artifact, {short_id(pins.current)}, is not served: start an experiment "
                   "with it or promote it)")
    active = Selection(target.id, "artifact", str(path), reason, served.prompt, served.content_sha256,
                       served.content_sha256)
    if pins.experiment is None or pins.treatment is None:
        return Route(active)
    experiment, (treated, treated_path) = pins.experiment, pins.treatment
    control = replace(active, arm="control", experiment=experiment.id,
                      reason=f"{reason}; the control arm of experiment {experiment.id}")
    active = replace(active, reason=f"{reason}; experiment {experiment.id} gives version "
                                    f"{short_id(treated.content_sha256)} to {experiment.share:.0%} of users "
                                    "(by user_id; calls without one get the active version)")
    treatment = Selection(target.id, "artifact", str(treated_path),
                          f"version {short_id(treated.content_sha256)} is the treatment arm of experiment "
                          f"{experiment.id} in {pins.file.name}", treated.prompt, treated.content_sha256,
                          treated.content_sha256, "treatment", experiment.id)
    return Route(active, experiment, control, treatment)


def retarget(prompt: RenderedPrompt, target: CatalogModel) -> RenderedPrompt:
    """Another model's compiled prompt, sent to ``target``: output limit clamped to it, and no
    sampling parameter that ``target`` rejects."""
    generation = dict(prompt.generation)
    if generation.get("max_tokens", 0) > target.max_output:
        generation["max_tokens"] = target.max_output
    sampling = target.capabilities.sampling_params
    if not sampling:
        for key in ("temperature", "top_p"):
            generation.pop(key, None)
    return replace(prompt, model=target.id, generation=generation, sampling_params=sampling)
