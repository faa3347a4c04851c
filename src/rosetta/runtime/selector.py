"""Which prompt a model gets, and why: exact artifact ▸ family ▸ provider ▸ uncompiled render.

Another model's artifact lends a model only what was chosen for the prompt — its text, demos and
knobs — and only when it was optimized (a plain render has nothing to lend) and rendered by the same
adapter with the same system placement and structured-output mechanism as the model's own render.
Everything else — generation parameters, the output limit, sampling rules, tools and the
structured-output request — comes from the running model's own render (:func:`refit`), so that what
runs is what ``rosetta render``/``show``/``diff`` show for that model. A declared model's artifact
(its own endpoint) never stands in for another id, and an artifact the agent's cross-model matrix
(``compiled/<agent>/cross.yaml``, written by ``rosetta evaluate --cross``) scored below the running
model's own uncompiled render on that model is not lent to it (:mod:`rosetta.store.cross`).

An artifact is used only when the store has verified it (see :mod:`rosetta.store.lookup`: it is
this agent's, for this model, sealed, and built from inputs that hash the same now; in strict mode,
also what its definition and labeled data render to now, which holds for pinned versions too).
Every fallback is logged once per (agent, model) with its reason: an alias and the model's full id
are one model, and :meth:`Selector.fresh` (behind ``explain``) chooses again and logs again, its
choice then serving the runs, so a model explained and then run is logged once. ``strict`` turns
fallbacks into errors. A ``<model>.rollout.yaml`` beside the exact model's artifact pins which
version serves and may run an experiment: each user then gets the control or the treatment version,
always the same one (see :mod:`rosetta.store.routing`). A rollout file that cannot be used is logged
and ignored, never fatal (except in strict mode).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rosetta.errors import Location, Problem, RolloutError, UsageError
from rosetta.providers.catalog import catalog_for
from rosetta.providers.model_entries import CatalogModel
from rosetta.render.prompt import RenderedPrompt
from rosetta.settings import Settings
from rosetta.store.artifact import Artifact, ArtifactError
from rosetta.store.lookup import Shelf
from rosetta.store.routing import Route
from rosetta.store.versions import short_id

if TYPE_CHECKING:
    from rosetta.store.routing import Pins

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

    def __init__(self, name: str, definition_path: Path | None, dirs: Settings, strict: bool) -> None:
        self.name, self.definition_path, self.dirs, self.strict = name, definition_path, dirs, strict
        self.shelf = Shelf(dirs, name)
        self._routes: dict[tuple[str, bool], Route] = {}  # by (resolved model id, strict)
        self._ids: dict[str, str] = {}  # each name asked for → the catalog id it resolved to
        self._adapters: dict[str, Any] | None = None

    @property
    def adapters(self) -> dict[str, Any]:
        """The bundled adapters and the project's (``adapter_dirs``), loaded once."""
        if self._adapters is None:
            from rosetta.providers.adapter import load_adapters

            self._adapters = load_adapters([d for d in self.dirs.adapter_dirs if d.is_dir()])
        return self._adapters

    def select(self, model: str, strict: bool | None = None, user_id: object | None = None) -> Selection:
        """The selection for ``model`` (cached, under the id ``model`` resolves to, so that an alias and
        the full id share one choice and one fallback warning): during an experiment, the one of
        ``user_id``'s arm."""
        strict = self.strict if strict is None else strict
        resolved = self._ids.get(model)
        if resolved is None:
            resolved = self._ids[model] = self.target(model).id
        route = self._routes.get((resolved, strict))
        if route is None:
            route = self.fresh(model, strict)
        selection: Selection = route.pick(user_id)  # store/ holds the runtime's selections untyped
        return selection

    def fresh(self, model: str, strict: bool) -> Route:
        """:meth:`route`, chosen now (logging any fallback) and kept for :meth:`select`: a selection
        explained and then run is chosen, and its fallback logged, once."""
        route = self.route(model, strict)
        self._ids[model] = resolved = route.active.model
        self._routes[(resolved, strict)] = route
        return route

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
        target = catalog.find(model) or catalog.resolve(model, self.adapters, unlisted=self.dirs.unlisted_models)
        catalog.refuse_retired(target)
        return target

    def choose(self, target: CatalogModel, strict: bool) -> Selection:
        """The artifact for the exact model, else one of its family's or provider's re-fitted to it
        (see the module docstring), else the uncompiled render."""
        reasons: list[str] = []
        own: RenderedPrompt | None = None
        for kind, model_id, path in self._candidates(target):
            if kind == "declared":
                reasons.append(f"{path.name} for {model_id}: skipped, made for that declared model's own endpoint")
                continue
            artifact = self.shelf.verified(path)
            if not isinstance(artifact, str) and strict:
                artifact = self.shelf.reproduced(path, self.definition_path) or artifact
            if not isinstance(artifact, str) and kind == "artifact":
                return Selection(target.id, kind, str(path), "compiled artifact for this model", artifact.prompt,
                                 artifact.content_sha256, artifact.content_sha256)
            if isinstance(artifact, str):
                reasons.append(f"{path.name} for {model_id}: {artifact}")
                continue
            own = own or self.render_uncompiled(target)
            fitted = refit(artifact, own)
            skipped = fitted if isinstance(fitted, str) else self._hurts(model_id, target.id, artifact.content_sha256)
            if skipped:
                reasons.append(f"{path.name} for {model_id}: skipped, {skipped}")
                continue
            assert not isinstance(fitted, str)
            reason = (f"no usable artifact for {target.id}" + (f" ({'; '.join(reasons)})" if reasons else "")
                      + f"; using the {kind} artifact for {model_id}: its prompt text and demos, with {target.id}'s "
                        "own parameters and structured output")
            self._fallback(target.id, reason, strict)
            return Selection(target.id, kind, str(path), reason, fitted, artifact.content_sha256,
                             artifact.content_sha256)
        reason = (f"no usable compiled artifact for {target.id}" + (f" ({'; '.join(reasons)})" if reasons else "")
                  + "; rendering the definition uncompiled")
        if strict:  # raises, rendering nothing
            self._fallback(target.id, reason, strict)
        own = own or self.render_uncompiled(target)  # a render that fails says so, with no fallback logged first
        self._fallback(target.id, reason, strict)
        return Selection(target.id, "uncompiled", None, reason, own, f"fallback: {reason}")

    def render_uncompiled(self, target: CatalogModel) -> RenderedPrompt:
        """The definition rendered for ``target`` now, with no artifact."""
        if self.definition_path is None:
            raise UsageError(Problem(f"{self.name}: no definition found to render for {target.id}",
                                     Location(str(self.dirs.signatures_dir)),
                                     hint="load the agent by path, or compile it for this model"))
        from rosetta.definition.loader import load_definition
        from rosetta.render.renderer import render
        from rosetta.signature import lower

        definition = load_definition(self.definition_path, root=self.dirs.root, section_roles=self.dirs.section_roles)
        return render(lower(definition), target, adapters=self.adapters)

    def _candidates(self, target: CatalogModel) -> list[tuple[str, str, Path]]:
        """This agent's artifacts that may serve ``target``: its own, then its family's, then its
        provider's (a declared model's only to say why it does not serve)."""
        names = catalog_for(self.dirs.root, self.dirs.models).names()
        exact: list[tuple[str, str, Path]] = []
        family: list[tuple[str, str, Path]] = []
        provider: list[tuple[str, str, Path]] = []
        for model_id, path in sorted(self.shelf.artifacts.items()):
            if model_id == target.id:
                exact.append(("artifact", model_id, path))
                continue
            other = names.get(model_id.lower())
            if other is None or other.id != model_id:  # only a model's own id lends: never an alias or other case
                continue
            if target.family != other.family and target.provider != other.provider:
                continue
            kind = "declared" if other.source == "project" else "family" if other.family == target.family \
                else "provider"
            (provider if kind == "provider" or other.family != target.family else family).append(
                (kind, model_id, path))
        return exact + family + provider

    def _hurts(self, lender: str, borrower: str, artifact_sha: str) -> str | None:
        """Why the cross-model matrix forbids lending ``lender``'s artifact to ``borrower`` (None: it
        does not, or there is no usable matrix; an unusable one is logged and ignored)."""
        record = self.shelf.cross
        if isinstance(record, str):
            log.warning("%s: %s; lending artifacts between models without it", self.name, record)
            return None
        return None if record is None else record.hurts(lender, borrower, artifact_sha)

    def _fallback(self, model: str, reason: str, strict: bool) -> None:
        if strict:
            raise ArtifactError(Problem(f"{self.name} on {model}: {reason}", Location(str(self.dirs.compiled_dir)),
                                        hint="run `rosetta compile`, or load without strict=True to allow fallbacks"))
        log.warning("%s on %s: %s", self.name, model, reason)


def _pinned_route(target: CatalogModel, pins: Pins) -> Route:
    """The route a rollout file pins: its active version, and an experiment's two arms if one runs."""
    assert pins.active is not None  # the caller routes by pins that have an active version only
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


def refit(artifact: Artifact, own: RenderedPrompt) -> RenderedPrompt | str:
    """``own`` (the running model's render) with the text, demos and knobs of another model's
    optimized ``artifact``, or why it cannot lend them."""
    borrowed = artifact.prompt
    for what, theirs, ours in (("rendered by the {} adapter", borrowed.adapter, own.adapter),
                               ("its system placement is {}", borrowed.system_placement, own.system_placement),
                               ("structured output by {}", borrowed.structured_output, own.structured_output)):
        if theirs != ours:
            return f"{what.format(getattr(theirs, 'value', theirs))}; {own.model} takes {getattr(ours, 'value', ours)}"
    if not artifact.provenance.optimizer and not artifact.provenance.knobs:
        return f"a plain render: {own.model}'s own render is the better fit"
    return replace(own, system=borrowed.system, demos=borrowed.demos, demo_ids=borrowed.demo_ids,
                   demo_pool=borrowed.demo_pool, user_blocks=borrowed.user_blocks, knobs=borrowed.knobs,
                   tokens=borrowed.tokens, dropped=borrowed.dropped)
