"""``rosetta export promptfoo AGENT``: a promptfoo suite over an agent's compiled prompts, so a team's
own eval tool opens every per-model variant with the agent's labeled rows.

The suite is two files in one folder: ``promptfooconfig.yaml`` (one prompt and one provider per
compiled artifact, each provider restricted to its own prompt; the split's rows as tests, each with
``is-json`` against the output schema and the agent's metric), and ``rosetta_promptfoo.py``, through
which promptfoo asks rosetta for each artifact's exact messages, sends them the way rosetta's runtime
does, and scores answers the way ``rosetta evaluate`` does (:mod:`rosetta.export.promptfoo_bridge`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rosetta.errors import Problem, UsageError

if TYPE_CHECKING:
    from rosetta.datasets import Example
    from rosetta.settings import Settings

CONFIG = "promptfooconfig.yaml"
BRIDGE = "rosetta_promptfoo.py"

_BRIDGE_SOURCE = '''\
"""Written by `rosetta export promptfoo {agent}`: promptfoo calls these functions (see
promptfooconfig.yaml); rosetta renders each compiled prompt, sends it and scores the answer."""

from rosetta.export.promptfoo_bridge import Bridge

bridge = Bridge({project!r}, {definition!r}, {artifacts!r})


def prompt(context):
    """The messages the prompt's model gets for this test's variables."""
    return bridge.messages(context["config"]["model"], context)


call_api = bridge.call_api
get_assert = bridge.get_assert
'''


@dataclass(frozen=True)
class Export:
    """What was written: the folder, and how many prompts (one per model) and tests it holds."""

    folder: Path
    models: tuple[str, ...]
    tests: int

    @property
    def config(self) -> Path:
        return self.folder / CONFIG


def export_promptfoo(definition: Path, out: Path | None, *, settings: Settings, models: Sequence[str] = (),
                     split: str = "test", limit: int | None = None, dataset: str | None = None) -> Export:
    """Write the suite for the agent at ``definition`` into ``out`` (default: ``promptfoo/<agent>``
    in the project, never through a link the project planted): its compiled artifacts (those of
    ``models`` when given), and the first ``limit`` rows of ``split`` as tests."""
    from rosetta.fileio import NotRegularFile, write_trusted
    from rosetta.optimize.context import load_context
    from rosetta.runtime.agent import load
    from rosetta.store.lookup import scan
    from rosetta.yaml_text import dump_yaml

    agent = load(definition, project=settings.root)
    found = scan(settings.compiled_dir, agent.name)[0]
    chosen = _chosen(agent.name, found, models, settings)
    artifacts = {}
    for model in chosen:
        selection = agent.explain(model, strict=False)
        if selection.kind != "artifact":
            raise UsageError(Problem(f"{agent.name}: the artifact for {model} is not usable: {selection.reason}",
                                     field="--model", hint=f"rosetta compile {agent.name} --model {model}"))
        artifacts[model] = selection.artifact_id
    context = load_context(definition, chosen[0], settings=settings, dataset=dataset)
    rows = context.data.split(split)[:limit]
    if not rows:
        raise UsageError(Problem(f"{agent.name}: the {split} split has no rows", field="--split",
                                 hint="label rows for it (datasets/README.md), or pick another split"))
    schema = context.signature.output_schema
    labels = {model: f"{agent.name} for {model}" for model in chosen}
    suite = {
        "description": f"{agent.name}: {len(chosen)} compiled prompt(s) on {len(rows)} {split} row(s), "
                       f"scored by its metric ({context.metric.name})",
        "env": {"PROMPTFOO_PYTHON": sys.executable,  # the Python that has rosetta
                "PROMPTFOO_DISABLE_TEMPLATING": "true"},  # the messages are sent as rendered, never re-templated
        "prompts": [{"id": f"file://{BRIDGE}:prompt", "label": labels[model], "config": {"model": model}}
                    for model in chosen],
        "providers": [{"id": f"file://{BRIDGE}", "label": model, "config": {"model": model},
                       "prompts": [labels[model]]} for model in chosen],
        "tests": [_test(row, schema, context.metric.name) for row in rows],
    }
    header = (f"# Written by `rosetta export promptfoo {agent.name}`: one prompt per compiled artifact, each sent to "
              f"its own model\n# through rosetta ({BRIDGE}); run it with `npx promptfoo eval -c {CONFIG}` here, "
              "then `npx promptfoo view`.\n")
    folder, root = (settings.root / "promptfoo" / agent.name, settings.root) if out is None else (out, out)
    bridge = _BRIDGE_SOURCE.format(agent=agent.name, project=str(settings.root.resolve()),
                                   definition=str(Path(definition).resolve()), artifacts=artifacts)
    try:
        write_trusted(folder / CONFIG, header + dump_yaml(suite), root)
        write_trusted(folder / BRIDGE, bridge, root)
    except NotRegularFile as refused:
        raise UsageError(Problem(f"cannot write the suite: {refused}", field="--out",
                                 hint="pass --out with a folder of your own")) from None
    return Export(folder, tuple(chosen), len(rows))


def _chosen(agent: str, found: dict[str, Path], models: Sequence[str], settings: Settings) -> list[str]:
    """The models to export: all compiled ones, or those asked for (each resolved as the runtime
    resolves it, and each compiled)."""
    if not found:
        raise UsageError(Problem(f"{agent} has no compiled artifact under {settings.compiled_dir}",
                                 field="agent", hint=f"rosetta compile {agent} --model MODEL first"))
    if not models:
        return sorted(found)
    from rosetta.providers.adapter import load_adapters
    from rosetta.providers.catalog import catalog_for

    catalog, adapters = catalog_for(settings.root, settings.models), load_adapters(settings.adapter_dirs)
    chosen = []
    for name in models:
        model = catalog.resolve(name, adapters, unlisted=settings.unlisted_models).id
        if model not in found:
            raise UsageError(Problem(f"{agent} has no artifact for {model}", field="--model",
                                     expected=", ".join(sorted(found)),
                                     hint=f"rosetta compile {agent} --model {name}"))
        chosen.append(model)
    return list(dict.fromkeys(chosen))


def _test(row: Example, schema: dict[str, Any] | None, metric: str) -> dict[str, Any]:
    """One labeled row as a promptfoo test: its inputs as variables; valid JSON for the schema (when
    the agent has one) and the agent's metric against the row's output as assertions."""
    checks: list[dict[str, Any]] = [{"type": "is-json", "value": schema}] if schema else []
    checks.append({"type": "python", "value": f"file://{BRIDGE}:get_assert", "metric": metric,
                   "config": {"expected": row.output}})
    return {"description": row.id, "vars": dict(row.inputs), "assert": checks}
