"""``--optimizer dspy-mipro | dspy-bootstrap``: DSPy's optimizers on the agent's ``to_dspy()``
signature, converted into the same artifact format.

DSPy chooses instructions and demos with its own prompt formats, from train and dev (it never sees
test); the artifact then holds those choices rendered by rosetta for the target model
(``Knobs.instructions`` and the demos), scored on dev through rosetta's runtime like any other
artifact (test comes after, once the activation is decided: see :mod:`rosetta.optimize.target`),
so ``rosetta evaluate`` reproduces its recorded scores.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rosetta.errors import Problem, UsageError
from rosetta.optimize.cache import EvalCache
from rosetta.optimize.evaluation import Budget, Evaluator, interval95
from rosetta.optimize.proposer import Proposals
from rosetta.optimize.study import SearchOutcome, SearchSettings, SearchStatus
from rosetta.parts import Demo
from rosetta.render.prompt import Knobs

if TYPE_CHECKING:
    from rosetta.datasets import Example
    from rosetta.optimize.context import Context
    from rosetta.optimize.metrics import Metric
    from rosetta.providers.adapter import Adapter
    from rosetta.providers.model_entries import CatalogModel
    from rosetta.render.prompt import RenderedPrompt
    from rosetta.runtime.salvage import Complete
    from rosetta.settings import Settings
    from rosetta.signature import Signature


def dspy_examples(signature: Signature, examples: Sequence[Example]) -> list[Any]:
    """rosetta examples as ``dspy.Example`` objects: the inputs, and the output in DSPy's fields."""
    return [signature.dspy_example(example.inputs, example.output, rosetta_id=example.id) for example in examples]


def dspy_metric(signature: Signature, metric: Metric) -> Callable[..., float]:
    """Our metric in DSPy's ``(example, prediction, trace)`` shape; an unparsed answer, or one the
    output schema refuses, scores as an invalid answer does at run time."""

    def score(example: object, prediction: object, trace: object = None) -> float:
        data = signature.output_from_dspy(prediction, validate=False)
        valid = bool(data) and not signature.dspy_output_problems(prediction)
        value: float = metric.score(data or None, signature.output_from_dspy(example, validate=False), valid=valid)
        return value >= 1.0 if trace is not None else value  # bootstrapping keeps only perfect traces

    return score


def dspy_lm(model: CatalogModel, signature: Signature, **extra: Any) -> Any:
    from rosetta.local.provider import register
    from rosetta.third_party import import_dspy

    dspy = import_dspy()

    register()  # the local/ provider, for DSPy's own litellm calls
    params = signature.generation_params.get("default")
    limit = params.max_output_tokens if params and params.max_output_tokens else 1000
    max_tokens = limit + DSPY_MARKER_TOKENS * (len(signature.dspy_outputs()) + 1)
    return dspy.LM(model.id, temperature=0.0, max_tokens=max_tokens, cache=False, num_retries=0,
                   **{**model.connection(), **extra})  # a declared model's endpoint and key


DSPY_MARKER_TOKENS = 12
"""Room for DSPy's own format, which the agent's output limit does not count: a ``[[ ## field ## ]]``
line per output field and the closing ``[[ ## completed ## ]]``. Without it a short answer (a
20-token label) is cut off, and DSPy asks again through its JSON adapter: two calls per answer."""

TOLERATED_ERRORS = 1_000_000
"""DSPy cancels an optimizer after ``dspy.settings.max_errors`` (10) answers it cannot parse. A small
model misses DSPy's formats far more often than that, so an unparsable answer scores 0 instead,
as in rosetta's own search; only a failure of the optimizer itself (a proposer) still stops it."""


def compile_with_dspy(name: str, signature: Signature, train: list[Any], dev: list[Any], metric: Metric, lm: object,
                      *, prompt_lm: object = None, seed: int = 0, jobs: int = 1, demos: int = 4) -> Any:
    """Run one DSPy optimizer; returns the compiled ``dspy.Predict`` program."""
    from rosetta.third_party import import_dspy, quiet_dspy, using_litellm

    dspy = import_dspy()
    program = dspy.Predict(signature.to_dspy())
    scorer = dspy_metric(signature, metric)
    with dspy.context(lm=lm), quiet_dspy(), using_litellm():  # quiet: its INFO lines would break the display
        if name == "dspy-labeled":
            return dspy.LabeledFewShot(k=demos).compile(program, trainset=train)
        if name == "dspy-bootstrap":
            optimizer = dspy.BootstrapFewShotWithRandomSearch(
                metric=scorer, max_bootstrapped_demos=demos, max_labeled_demos=demos, num_candidate_programs=8,
                num_threads=jobs, max_errors=TOLERATED_ERRORS)
            return optimizer.compile(program, trainset=train, valset=dev)
        if name == "dspy-mipro":
            optimizer = dspy.MIPROv2(metric=scorer, prompt_model=prompt_lm or lm, task_model=lm, auto="light",
                                     num_threads=jobs, seed=seed, max_bootstrapped_demos=demos,
                                     max_labeled_demos=demos, verbose=False, max_errors=TOLERATED_ERRORS)
            return optimizer.compile(program, trainset=train, valset=dev)
    raise UsageError(Problem(f"unknown DSPy optimizer {name!r}", field="--optimizer"))


def run_dspy(name: str, context: Context, search: SearchSettings, *, cache: EvalCache, complete: Complete | None = None,
             on_status: Callable[[SearchStatus], None] | None = None) -> SearchOutcome:
    """DSPy's search, then rosetta's render of what it chose, scored on dev through the runtime."""
    signature, model, adapter, data, metric = (context.signature, context.model, context.adapter, context.data,
                                               context.metric)
    status = SearchStatus(trials_total=1, phase=f"running DSPy {name}")
    if on_status is not None:
        on_status(status)
    lm = dspy_lm(model, signature)
    prompt_lm = dspy_lm(_model(search.proposer, context.settings), signature) if search.proposer else None
    train, dev = dspy_examples(signature, data.train), dspy_examples(signature, data.dev)
    high = signature.demo_range[1]
    try:
        program = compile_with_dspy(name, signature, train, dev, metric, lm, prompt_lm=prompt_lm, seed=search.seed,
                                    jobs=search.jobs, demos=max(high, 1))
    except UsageError:
        raise
    except Exception as error:  # DSPy raises whatever its proposer or parser hit
        raise UsageError(Problem(f"DSPy {name} failed on {model.id}: {type(error).__name__}: "
                                 f"{str(error).splitlines()[0] if str(error) else ''}"[:400],
                                 field="--optimizer", hint="weak models often break DSPy's proposers; try "
                                 "--optimizer rosetta, or --proposer with a stronger model")) from None
    dspy_calls = len(lm.history) + (len(prompt_lm.history) if prompt_lm is not None else 0)
    prompt, chosen, instructions = program_prompt(signature, program, model, adapter)
    budget = Budget()
    evaluator = Evaluator(context.agent, metric, cache, budget, jobs=search.jobs, complete=complete)
    status.phase = "scoring DSPy's choice through rosetta's runtime"
    if on_status is not None:
        on_status(status)
    dev_scores = evaluator.scores(prompt, data.dev)
    return SearchOutcome(
        prompt=prompt, params={"optimizer": name}, dev_score=sum(dev_scores) / len(dev_scores), baseline_dev=None,
        trials=1, pruned=0, calls=dspy_calls + budget.calls, cost=budget.cost, paid_calls=budget.paid_calls,
        proposals=Proposals(search.proposer, 0), space={"dspy": name}, study=f"dspy:{name}", storage="none",
        dev_interval=interval95(dev_scores), dev_examples=len(dev_scores),
        notes=[f"DSPy {name} chose {len(chosen)} demos" + (" and new instructions" if instructions else "")
               + f" with {dspy_calls} model calls; rosetta rendered them for {model.id}"],
    )


def program_prompt(signature: Signature, program: Any, model: CatalogModel,
                   adapter: Adapter) -> tuple[RenderedPrompt, list[Demo], str | None]:
    """What a DSPy program chose — its first predictor's instructions (when not the ones ``to_dspy``
    gave it) and demos (up to the definition's count) — rendered by rosetta for ``model``: the
    prompt, the demos and the instructions."""
    from rosetta.render.renderer import render

    predictor = program.predictors()[0]
    high = signature.demo_range[1]
    chosen = [Demo(id=f"dspy:{getattr(d, 'rosetta_id', None) or n}",
                   inputs={f.name: d[f.name] for f in signature.inputs if f.name in d},
                   output=signature.output_from_dspy(d)) for n, d in enumerate(predictor.demos)]
    chosen = chosen[:high] if high else []
    original = signature.dspy_instructions()
    instructions = predictor.signature.instructions if predictor.signature.instructions != original else None
    searchable = signature.model_copy(update={"demos": tuple(chosen)})
    knobs = Knobs(instructions=instructions, demo_ids=tuple(d.id for d in chosen), demo_count=len(chosen)) \
        if chosen else Knobs(instructions=instructions)
    return render(searchable, model, knobs, adapters={adapter.name: adapter}), chosen, instructions


def _model(name: str, settings: Settings) -> CatalogModel:
    from rosetta.providers.catalog import catalog_for

    return catalog_for(settings.root, settings.models).resolve(name, unlisted=settings.unlisted_models)


def from_dspy(program: Any, agent: str | Path, model: str, *, project: str | Path | None = None) -> Path:
    """Import what a DSPy program chose (its first predictor's instructions and demos, e.g. after a
    DSPy optimizer ran on ``agent.to_dspy_program()``) as a version of ``agent``'s artifact for
    ``model``, rendered by rosetta for that model. It is kept beside the active artifact, not served:
    ``rosetta versions`` lists it, and an experiment or ``experiment promote --version`` puts it to
    use. Returns the version's file."""
    from dataclasses import replace

    from rosetta.settings import load_settings
    from rosetta.definition.loader import load_definition
    from rosetta.providers.adapter import load_adapters
    from rosetta.providers.catalog import catalog_for
    from rosetta.runtime.agent import load
    from rosetta.signature import lower
    from rosetta.store.artifact import artifact_path, dump_artifact
    from rosetta.store.publish import publish_version
    from rosetta.store.verify import artifact_of, expected_provenance

    settings = load_settings(project)
    definition_path = load(agent, project=settings.root).definition_path
    if definition_path is None:
        raise UsageError(Problem(f"{agent}: no definition to import a DSPy program into", field="agent"))
    definition = load_definition(definition_path, root=settings.root, section_roles=dict(settings.section_roles))
    signature = lower(definition)
    adapters = load_adapters(settings.adapter_dirs)
    catalog = catalog_for(settings.root, settings.models)
    target = catalog.resolve(model, adapters, unlisted=settings.unlisted_models)
    catalog.refuse_retired(target)
    adapter = adapters[target.adapter]
    if not getattr(program, "predictors", None) or not program.predictors():
        raise UsageError(Problem("the DSPy program has no predictor to import", field="program",
                                 hint="pass the program a DSPy optimizer compiled, e.g. from to_dspy_program()"))
    prompt, chosen, instructions = program_prompt(signature, program, target, adapter)
    provenance = replace(
        expected_provenance(definition, target, adapter, settings.root, settings.section_roles),
        knobs={k: v for k, v in prompt.knobs.to_dict().items() if v is not None},
        optimizer={"name": "dspy-import", "notes": [
            f"imported from a DSPy program: {len(chosen)} demos"
            + (" and its own instructions" if instructions else ", the definition's instructions")]})
    artifact = artifact_of(signature, adapter, provenance, prompt)
    path = artifact_path(settings.compiled_dir, signature.name, target.id)
    return publish_version(path, dump_artifact(artifact), settings.compiled_dir)
