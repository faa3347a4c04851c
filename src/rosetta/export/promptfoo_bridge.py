"""What promptfoo calls when it runs a suite ``rosetta export promptfoo`` wrote: the prompt of each
compiled artifact for a test's variables, the call to its model, and the agent's own metric as an
assertion. promptfoo loads the exported ``rosetta_promptfoo.py`` in its Python worker; that file
builds one :class:`Bridge` and hands these methods to promptfoo.

Each piece is rosetta's own, so promptfoo sees what rosetta's runtime sends and scores as
``rosetta evaluate`` scores: the messages come from the artifact (retrieved demos, system placement,
cache marks included), the call goes through the runtime's one call path (the project's endpoints
and their trust rule, embedded models, retries), and the score is the agent's metric on the answer
as the runtime reads it. An artifact that changed after the export is refused, not silently used."""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rosetta.optimize.metrics import Metric
    from rosetta.render.prompt import RenderedPrompt
    from rosetta.runtime.agent import Agent


class Bridge:
    """One agent's compiled prompts, as exported: ``artifacts`` maps each model id to the
    content_sha256 of the artifact the suite was written for."""

    def __init__(self, project: str, definition: str, artifacts: Mapping[str, str]) -> None:
        self.project = Path(project)
        self.definition = Path(definition)
        self.artifacts = dict(artifacts)

    @cached_property
    def agent(self) -> Agent[Any]:
        from rosetta.runtime.agent import load

        return load(self.definition, project=self.project)

    @cached_property
    def metric(self) -> Metric:
        """The agent's metric as ``rosetta evaluate`` resolves it (a judge grades with the first model)."""
        from rosetta.optimize.context import load_context
        from rosetta.settings import load_settings

        context = load_context(self.definition, next(iter(self.artifacts)), settings=load_settings(self.project))
        return context.metric

    def prompt(self, model: str) -> RenderedPrompt:
        """The compiled prompt the suite was exported with; a changed or missing artifact is an error
        that says to export again."""
        expected = self.artifacts.get(model)
        if expected is None:
            raise ValueError(f"{model} is not in this export (it has {', '.join(self.artifacts)})")
        selection = self.agent.explain(model, strict=False)
        if selection.kind != "artifact" or selection.artifact_id != expected:
            found = selection.artifact_id if selection.kind == "artifact" else f"no artifact ({selection.reason})"
            raise ValueError(f"{self.agent.name} for {model}: the suite was exported for artifact {expected[:12]}, "
                             f"and the project now has {found[:60]}; run `rosetta export promptfoo "
                             f"{self.agent.name}` again")
        return selection.prompt

    # -- what promptfoo calls ----------------------------------------------------------------

    def messages(self, model: str, context: Mapping[str, Any]) -> list[dict[str, Any]]:
        """A prompt function: the chat messages ``model``'s artifact sends for the test's variables."""
        return self.prompt(model).messages(_inputs(context))

    def call_api(self, prompt: str, options: Mapping[str, Any], context: Mapping[str, Any]) -> dict[str, Any]:
        """A provider: send ``prompt`` (the messages, as JSON) to the model its config names, with the
        artifact's parameters, through the runtime; the answer, tokens and cost, or the error."""
        from rosetta.errors import RosettaError

        model = str((options.get("config") or {}).get("model", ""))
        try:
            compiled = self.prompt(model)
            messages = _messages(prompt)
            result = self.agent.run_prompt(compiled, _inputs(context), messages=messages,
                                           label=self.artifacts[model])  # logs and Result.artifact name it
        except (RosettaError, ValueError) as error:
            problems = getattr(error, "problems", None)
            return {"error": str(problems[0].message) if problems else str(error)}
        usage = result.usage or {}
        tokens = {"prompt": usage.get("prompt_tokens", 0), "completion": usage.get("completion_tokens", 0),
                  "total": usage.get("total_tokens", 0), "cached": usage.get("cached_tokens", 0)}
        response: dict[str, Any] = {"output": result.raw, "tokenUsage": tokens,
                                    "metadata": {"model": model, "artifact": result.artifact,
                                                 "attempts": [str(a.outcome) for a in result.attempts]}}
        if result.cost is not None:
            response["cost"] = result.cost
        return response

    def get_assert(self, output: str, context: Mapping[str, Any]) -> dict[str, Any]:
        """An assertion: the agent's metric on the answer as the runtime reads it, against the
        expected output the test carries in its config."""
        from rosetta.runtime.answers import read_answer

        config = context.get("config") or {}
        model = _model_of(context)
        read = read_answer(output, self.prompt(model))
        valid = not read.issues
        score = self.metric.score(read.data, config.get("expected"), valid=valid)
        threshold = float(config.get("threshold", 1.0))
        reason = (f"{self.metric.name} {score:.3f}" if valid else
                  f"invalid answer: {read.issues[0].path}: {read.issues[0].message}")
        if valid and score < threshold:
            reason += f"; expected {json.dumps(config.get('expected'), ensure_ascii=False)[:300]}"
        return {"pass": valid and score >= threshold, "score": score, "reason": reason}


def _inputs(context: Mapping[str, Any]) -> dict[str, Any]:
    """The test's variables that are the agent's inputs (promptfoo adds its own, such as ``_conversation``)."""
    return {name: value for name, value in (context.get("vars") or {}).items() if not name.startswith("_")}


def _messages(prompt: str) -> list[dict[str, Any]]:
    """The messages promptfoo hands the provider: the prompt function's JSON, or a plain text prompt
    (one a user wrote into the suite) as one user turn."""
    try:
        found = json.loads(prompt)
    except json.JSONDecodeError:
        return [{"role": "user", "content": prompt}]
    if isinstance(found, list) and all(isinstance(m, dict) and "role" in m for m in found):
        return found
    return [{"role": "user", "content": prompt}]


def _model_of(context: Mapping[str, Any]) -> str:
    """The model whose answer an assertion grades, as :meth:`Bridge.call_api` recorded it."""
    return str((context.get("metadata") or {}).get("model", ""))
