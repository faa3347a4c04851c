"""What every optimizer backend starts from: the agent's definition, signature, model, adapter,
labeled data and metric, loaded once (``rosetta compile --optimize``, ``rosetta evaluate``, the
DSPy backend and the notebook helpers)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rosetta.datasets import LabeledData, default_location, load_labeled
from rosetta.optimize.metrics import Metric, resolve_metric
from rosetta.settings import ProjectState, Settings

if TYPE_CHECKING:
    from rosetta.definition.document import AgentDefinition
    from rosetta.definition.models import Evaluation
    from rosetta.providers.adapter import Adapter
    from rosetta.providers.model_entries import CatalogModel
    from rosetta.runtime.agent import Agent
    from rosetta.signature import Signature


@dataclass
class Context:
    """The loaded pieces every optimizer backend needs."""

    signature: Signature
    definition: AgentDefinition
    model: CatalogModel
    adapter: Adapter
    data: LabeledData
    metric: Metric
    agent: Agent[Any]
    settings: Settings
    state: ProjectState  # <root>/.rosetta: study journals and the evaluation cache


def load_context(definition_path: Path, model_name: str, *, settings: Settings, metric: str | None = None,
                 dataset: str | None = None, adapters: dict[str, Adapter] | None = None) -> Context:
    from rosetta.definition.loader import load_definition
    from rosetta.providers.adapter import load_adapters
    from rosetta.providers.catalog import catalog_for
    from rosetta.runtime.agent import load
    from rosetta.signature import lower

    definition = load_definition(definition_path, root=settings.root, section_roles=dict(settings.section_roles))
    signature = lower(definition)
    adapters = adapters if adapters is not None else load_adapters(settings.adapter_dirs)
    catalog = catalog_for(settings.root, settings.models)
    model = catalog.resolve(model_name, adapters, unlisted=settings.unlisted_models)
    catalog.refuse_retired(model)  # today's date, read here at the edge; rendering reads no clock
    evaluation = definition.spec.evaluation
    location = dataset or default_location(settings.datasets_dir, signature.name, evaluation.dataset, settings.root)
    data = load_labeled(signature, location, cache_dir=settings.cache_dir)
    agent = load(definition_path, project=settings.root)
    metric_ = resolve_metric(metric, evaluation, signature, judge=_judge_for(settings, evaluation, model.id),
                             root=settings.root)
    return Context(signature, definition, model, adapters[model.adapter], data, metric_, agent, settings,
                   settings.state)


def _judge_for(settings: Settings, evaluation: Evaluation, model_id: str) -> Callable[..., float] | None:
    """The judge metric's grader: the project's rubric-reviewer agent on ``evaluation.judge``."""
    if evaluation.metric != "judge":
        return None
    from rosetta.optimize.judge import RubricJudge
    from rosetta.runtime.agent import judge_reviewer

    judge: Callable[..., float] = judge_reviewer(settings.root, evaluation.judge or model_id, kind=RubricJudge)
    return judge
