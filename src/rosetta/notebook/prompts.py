"""Looking at an agent's prompts in a notebook: one row per model, side-by-side texts, diffs."""

from __future__ import annotations

import difflib
import html
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rosetta.errors import Problem, RosettaError, UsageError

if TYPE_CHECKING:
    from rosetta.compile.compiler import TargetResult

STYLE = """<style>
.rosetta-nb table.diff {font-family: monospace; font-size: 12px; border-collapse: collapse}
.rosetta-nb table.diff td {padding: 0 4px; vertical-align: top; white-space: pre-wrap}
.rosetta-nb .diff_header {color: #888} .rosetta-nb td.diff_next {display: none}
.rosetta-nb .diff_add {background: #d4f8d4} .rosetta-nb .diff_chg {background: #fff3b0}
.rosetta-nb .diff_sub {background: #fbd3d3}
.rosetta-nb .columns {display: flex; gap: 12px; align-items: flex-start}
.rosetta-nb .column {flex: 1; min-width: 0}
.rosetta-nb pre {white-space: pre-wrap; font-size: 12px; border: 1px solid #ddd; padding: 6px; margin: 0}
</style>"""


@dataclass(frozen=True)
class View:
    """HTML for Jupyter with a plain-text twin (what a terminal or a stripped log shows)."""

    html: str
    text: str

    def _repr_html_(self) -> str:
        return f'{STYLE}<div class="rosetta-nb">{self.html}</div>'

    def __repr__(self) -> str:
        return self.text


def load(agent: Any, *, project: str | os.PathLike[str] | None = None, strict: bool | None = None) -> Any:
    """The runtime's agent, as ``rosetta.load`` gives it; every function here accepts its result
    or a name or path, so a notebook loads once and passes the agent around."""
    from rosetta.runtime.agent import Agent
    from rosetta.runtime.agent import load as load_agent

    if isinstance(agent, Agent):
        return agent
    text = os.fspath(agent)
    if project is None and (Path(text).suffix or "/" in text or os.sep in text):
        project = Path(text).resolve().parent  # a definition by path belongs to the project around it
    return load_agent(agent, project=project, strict=strict)


def _definition(agent: Any, project: Any = None) -> tuple[Any, Any, Any]:
    """(agent, lowered signature, project settings): what rendering needs, read as ``compile`` reads it."""
    from rosetta.settings import load_settings
    from rosetta.definition.loader import load_definition
    from rosetta.signature import lower

    loaded = load(agent, project=project)
    if loaded.definition_path is None:
        raise UsageError(Problem(f"{loaded.name}: only compiled artifacts were found, no definition to render",
                                 hint="load the agent by the path of its definition"))
    settings = load_settings(loaded.dirs.root)
    definition = load_definition(loaded.definition_path, root=settings.root,
                                 section_roles=dict(settings.section_roles))
    return loaded, lower(definition), settings


def signature(agent: Any, *, project: Any = None) -> Any:
    """The agent's provider-neutral :class:`~rosetta.signature.Signature` (inputs, output schema,
    sections and their roles, demos), lowered from its definition as ``rosetta compile`` lowers it."""
    return _definition(agent, project)[1]


def compile(agent: Any, models: Iterable[str] | str, *, out: str | os.PathLike[str],  # noqa: A001 (the verb)
            project: Any = None) -> list[TargetResult]:
    """Compile the agent for ``models`` into the folder ``out`` (not the project's ``compiled/``),
    as ``rosetta compile --model …`` does; one result per model (status, model, artifact path)."""
    from rosetta.compile.compiler import CompileOptions, compile_paths
    from rosetta.providers.adapter import load_adapters

    loaded, _, settings = _definition(agent, project)
    options = CompileOptions(out=Path(out), root=settings.root, adapters=load_adapters(settings.adapter_dirs),
                             models=tuple(_models(models)), section_roles=dict(settings.section_roles),
                             declared_models=dict(settings.models))
    return list(compile_paths([loaded.definition_path], options).results)


def render(agent: Any, model: str, knobs: Any = None, *, project: Any = None, **knob_values: Any) -> Any:
    """The prompt ``model`` gets for one variant (``render(signature, model, knobs)``): pass a
    :class:`~rosetta.render.Knobs` or its fields as keywords (``delimiter="xml"``, ``reasoning=True``)."""
    from rosetta.providers.adapter import load_adapters
    from rosetta.providers.catalog import lifecycle_date
    from rosetta.render.renderer import render as render_prompt

    if knobs is not None and knob_values:
        raise UsageError(Problem("give knobs or keyword knob values, not both", field="knobs"))
    _, signature, settings = _definition(agent, project)
    return render_prompt(signature, model, _knobs(knobs if knobs is not None else knob_values),
                         adapters=load_adapters(settings.adapter_dirs), unlisted=settings.unlisted_models,
                         today=lifecycle_date())


def _knobs(value: Any) -> Any:
    from rosetta.render.prompt import Knobs

    if value is None or isinstance(value, Knobs):
        return value
    if isinstance(value, Mapping):
        try:
            return Knobs(**value)
        except TypeError as exc:
            raise UsageError(Problem(f"not a knob: {exc}", field="knobs",
                                     expected="delimiter, section_order, reasoning, demo_ids, demo_count, "
                                              "demo_selection, instructions, structured_output, phase")) from None
    raise UsageError(Problem(f"knobs must be a Knobs or a mapping, not {type(value).__name__}", field="knobs"))


def _variants(variants: Mapping[str, Any] | None) -> dict[str, Any]:
    if variants is None:
        return {"default": None}
    if not isinstance(variants, Mapping) or not variants:
        raise UsageError(Problem("variants must be a non-empty mapping of name → knobs", field="variants",
                                 hint='e.g. {"default": {}, "xml": {"delimiter": "xml"}}'))
    return {str(name): _knobs(knobs) for name, knobs in variants.items()}


def _models(models: Iterable[str] | str) -> list[str]:
    names = [models] if isinstance(models, str) else list(models)
    if not names:
        raise UsageError(Problem("name at least one model", field="models", hint='e.g. ["sonnet", "openai/gpt-4o"]'))
    return names


def _renders(agent: Any, models: Iterable[str] | str, variants: Mapping[str, Any] | None,
             project: Any) -> list[tuple[str, str, Any]]:
    """(model, variant, prompt or the RosettaError that says why the agent cannot run there)."""
    from rosetta.providers.adapter import load_adapters
    from rosetta.providers.catalog import lifecycle_date
    from rosetta.render.renderer import render as render_prompt

    _, signature, settings = _definition(agent, project)
    adapters, today = load_adapters(settings.adapter_dirs), lifecycle_date()
    rows = []
    for model in _models(models):
        for name, knobs in _variants(variants).items():
            try:
                rows.append((model, name, render_prompt(signature, model, knobs, adapters=adapters,
                                                        unlisted=settings.unlisted_models, today=today)))
            except RosettaError as error:  # an unknown model, or one the agent cannot work on
                rows.append((model, name, error))
    return rows


def render_table(agent: Any, models: Iterable[str] | str, *, variants: Mapping[str, Any] | None = None,
                 project: Any = None) -> Any:
    """One row per model (and variant): what each provider's rules decided — adapter, structured
    output mechanism, delimiter, system placement, reasoning, tokens, demos, warnings. A model the
    agent cannot run on gets a row with the reason in ``error`` instead of stopping the table."""
    import pandas as pd

    rows = []
    for model, variant, prompt in _renders(agent, models, variants, project):
        row: dict[str, Any] = {"model": model}
        if variants is not None:
            row["variant"] = variant
        if isinstance(prompt, RosettaError):
            rows.append({**row, "error": prompt.problems[0].message})
            continue
        rows.append({**row, "model": prompt.model, "adapter": prompt.adapter, "class": prompt.model_class,
                     "structured_output": _value(prompt.structured_output),
                     "delimiter": _value(prompt.knobs.delimiter),
                     "system_placement": _value(prompt.system_placement), "reasoning": prompt.knobs.reasoning,
                     "tokens": prompt.tokens.get("total", 0), "demos": len(prompt.demo_ids),
                     "warnings": "; ".join(prompt.warnings), "error": ""})
    columns = ["model", *(["variant"] if variants is not None else []), "adapter", "class", "structured_output",
               "delimiter", "system_placement", "reasoning", "tokens", "demos", "warnings", "error"]
    return pd.DataFrame(rows, columns=columns)


def _value(value: Any) -> Any:
    return getattr(value, "value", value)


def show_prompts(agent: Any, models: Iterable[str] | str, *, variants: Mapping[str, Any] | None = None,
                 inputs: Mapping[str, Any] | None = None, project: Any = None) -> View:
    """The readable prompt of each model (and variant) in columns side by side, as manual mode
    shows it (``render_for_display``); ``inputs`` fills the request."""
    columns, texts = [], []
    for model, variant, prompt in _renders(agent, models, variants, project):
        title = model + (f" · {variant}" if variants is not None else "")
        if isinstance(prompt, RosettaError):
            body, header = f"cannot render: {prompt.problems[0].message}", title
        else:
            body = prompt.render_for_display(inputs)
            header = (f"{prompt.model} · {prompt.adapter} · {_value(prompt.structured_output) or 'free text'} · "
                      f"{prompt.tokens.get('total', 0):,} tokens" + (f" · {variant}" if variants is not None else ""))
        columns.append(f'<div class="column"><b>{html.escape(header)}</b><pre>{html.escape(body)}</pre></div>')
        texts.append(f"--- {header}\n{body}")
    return View(f'<div class="columns">{"".join(columns)}</div>', "\n".join(texts))


def knobs(agent: Any, model: str, *, project: Any = None) -> Any:
    """What the optimizer may vary for this agent on ``model`` (its adapter allows no more), one row
    per dimension, first choice the unoptimized render — read it before choosing a budget."""
    import pandas as pd

    from rosetta.optimize.space import build_space
    from rosetta.providers.adapter import load_adapters
    from rosetta.providers.catalog import catalog_for

    _, signature, settings = _definition(agent, project)
    adapters = load_adapters(settings.adapter_dirs)
    target = catalog_for(settings.root, settings.models).resolve(model, adapters, unlisted=settings.unlisted_models)
    space = build_space(signature, target, adapters[target.adapter], (), instructions=())
    low, high = signature.demo_range
    rows = [
        ("instruction", ["the definition's text", *(["the terse description"] if len(space.instructions) > 1 else [])],
         "plus any proposer rewrites"),
        ("demos", [f"{low}–{high} demos"] if high else ["none"],
         "sets drawn from train (labeled and bootstrapped), forward or reversed" if high else "few-shot is off"),
        ("reasoning", list(space.reasoning), ""),
        ("section_order", list(space.section_orders), ""),
        ("delimiter", list(space.delimiters), f"auto = {adapters[target.adapter].delimiter.value}"),
        ("structured_output", list(space.structured_outputs),
         f"auto = {_value(adapters[target.adapter].structured_output)}" if signature.output_schema else ""),
    ]
    return pd.DataFrame([{"dimension": d, "choices": c, "count": len(c), "note": n} for d, c, n in rows])


def diff(prompt_a: Any, prompt_b: Any, *, labels: tuple[str, str] | None = None,
         inputs: Mapping[str, Any] | None = None, context: bool = True) -> View:
    """A side-by-side diff of two prompts (rendered prompts or plain text), changes highlighted;
    ``context=False`` shows every line. Its text form is the unified diff ``rosetta diff`` prints."""
    texts, names = [], []
    for prompt, fallback in ((prompt_a, "a"), (prompt_b, "b")):
        if isinstance(prompt, str):
            texts.append(prompt)
            names.append(fallback)
        elif hasattr(prompt, "render_for_display"):
            texts.append(prompt.render_for_display(inputs))
            names.append(f"{prompt.model} ({prompt.adapter})")
        else:
            raise UsageError(Problem(f"cannot diff a {type(prompt).__name__}", field="prompt",
                                     expected="a RenderedPrompt or a string"))
    if labels is not None:
        names = list(labels)
    first, second = texts[0].splitlines(), texts[1].splitlines()
    unified = "".join(difflib.unified_diff([line + "\n" for line in first], [line + "\n" for line in second],
                                           fromfile=names[0], tofile=names[1]))
    if first == second:
        return View(f"<p>{html.escape(names[0])} and {html.escape(names[1])} are identical.</p>", "identical\n")
    table = difflib.HtmlDiff(wrapcolumn=70).make_table(first, second, html.escape(names[0]), html.escape(names[1]),
                                                       context=context, numlines=2)
    return View(table, unified)
