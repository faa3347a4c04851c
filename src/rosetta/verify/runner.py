"""``rosetta verify``: run each agent on each model and decide the behavioral criteria PV-011…PV-019.

Each agent runs through the runtime's own call path (``Agent.run_prompt``: input guardrails,
retries with the errors injected, validation, output rules) with the prompt the runtime would
pick for the model — its compiled artifact, or the fallback render — on its test examples (or the
definition's examples) and on adversarial probes (:mod:`rosetta.verify.cases`). What each
criterion checks:

- PV-011 every example's final answer validates against the output schema;
- PV-012 every call of the agent's own tools names a declared (and allowed) tool, with arguments
  valid against its parameter schema;
- PV-013 adversarial probes: an input guardrail refusing the probe is a pass; otherwise the answer
  must still validate, call no tool outside ``allowed_tools``, and the judge must find that it
  neither did what the planted instruction asked nor left its role;
- PV-014 the instructions each model receives state the definition's role and expertise — word
  for word (a pass by rule), else as the judge reads them;
- PV-015 the judge's weighted rubric score (``evaluation.rubric``, or one built from the
  definition) is ≥ 0.85, and within 0.07 of the primary (first) model's;
- PV-016 an agent whose structured output is optional still answers validly when the model's
  native mechanism is taken away (schema in the prompt only, no response_format);
- PV-017 an agent without a portability section renders and runs on the model;
- PV-018 an agent with one renders and answers validly with the section removed;
- PV-019 an example that names the tool calls it needs (``tool_calls`` in a labeled row, with the
  results the tools give) gets each of them, with arguments valid against the tool's schema.

Where the agent declares tools, every run may call them: an expected call gets its recorded result,
any other the caller's own function (``run_options.tools``) or an error the model is told of; the
loop goes on until the model answers, and PV-011… judge that answer.

The judge is the project's ``rubric-reviewer`` agent (:mod:`rosetta.runtime.review`).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rosetta.errors import RosettaError
from rosetta.providers.policy import ErrorKind
from rosetta.runtime.options import RunOptions
from rosetta.runtime.result import ModelCallError, Outcome
from rosetta.verify import criteria as rules
from rosetta.verify.cases import Case, NothingToVerify, adversarial_cases, example_cases
from rosetta.verify.findings import AgentResult, CaseRun, Check, CriterionResult, ModelResult, VerifyReport


@dataclass(frozen=True)
class VerifyOptions:
    models: tuple[str, ...]
    judge: str | None = None  # default: the first model
    dataset: str | None = None
    limit: int | None = None  # examples (and probes) per agent
    degraded_examples: int = 3  # PV-016 runs per model
    run_options: RunOptions = field(default_factory=RunOptions)  # for Agent.run_prompt (e.g. a RetryPolicy)
    fast: bool = False  # smoke mode: one example and one probe per agent, rule checks only (no judge, PV-016/018)

    @classmethod
    def smoke(cls, models: tuple[str, ...], **others: Any) -> VerifyOptions:
        """``--fast``: what can break without a judge, in a few calls per agent and model."""
        return cls(models=models, **{**others, "limit": 1, "degraded_examples": 0, "fast": True})


Progress = Callable[[str], None]

FAST_SKIPS = frozenset({"PV-016", "PV-018"})
"""Criteria ``--fast`` does not run (with PV-015, which needs the judge): they are reported n/a."""


def verify(definitions: Sequence[Path], options: VerifyOptions, *, settings: Any, complete: Any = None,
           on_progress: Progress | None = None) -> VerifyReport:
    """Verify every definition on every model (see the module docstring)."""
    from rosetta.__about__ import __version__
    from rosetta.runtime.agent import judge_reviewer

    judge = options.judge or options.models[0]
    reviewer = None if options.fast else judge_reviewer(settings.root, judge, complete=complete)
    report = VerifyReport(created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                          rosetta_version=__version__, models=list(options.models),
                          judge="none (--fast)" if options.fast else judge,
                          thresholds={"quality": rules.QUALITY_PASS, "quality_margin": rules.QUALITY_MARGIN})
    for path in definitions:
        report.agents.append(_verify_agent(Path(path), options, settings, reviewer, complete,
                                           on_progress or (lambda _: None), tree=len(definitions) > 1))
    return report


def _verify_agent(path: Path, options: VerifyOptions, settings: Any, reviewer: Any, complete: Any,
                  progress: Progress, *, tree: bool = False) -> AgentResult:
    from rosetta.definition.loader import load_definition
    from rosetta.runtime.agent import load
    from rosetta.signature import lower

    try:
        definition = load_definition(path, root=settings.root, section_roles=dict(settings.section_roles))
        signature = lower(definition)
        examples, source = example_cases(signature, path, datasets_dir=settings.datasets_dir,
                                         dataset=options.dataset, cache_dir=settings.cache_dir, limit=options.limit)
        probes = adversarial_cases(definition.spec, examples, datasets_dir=settings.datasets_dir,
                                   limit=options.limit)
        agent = load(path, project=settings.root)
    except RosettaError as error:
        if tree and isinstance(error, NothingToVerify):  # a tree's agent without examples is left out, and said so
            return AgentResult(agent=definition.name, definition=_relative(path, settings.root),
                               primary_model=options.models[0], cases="", skipped=error.problems[0].message)
        return AgentResult(agent=path.stem, definition=str(path), primary_model=options.models[0], cases="",
                           error=_first_line(error))
    result = AgentResult(agent=definition.name, definition=_relative(path, settings.root),
                         primary_model=options.models[0], cases=source)
    context = _AgentContext(definition, signature, agent, examples, probes, reviewer, complete, settings,
                            options.run_options)
    for model in options.models:
        progress(f"{definition.name} × {model}")
        result.models.append(context.verify_model(model, options, progress))
    primary = result.models[0].quality if result.models else None
    for number, model_result in enumerate(result.models):
        if model_result.not_run:  # every criterion already says why: n/a
            continue
        if options.fast:
            model_result.criteria.append(rules.not_applicable("PV-015", "not judged with --fast"))
            model_result.criteria.sort(key=lambda c: c.id)
            continue
        judged = [r for r in model_result.runs if r.review is not None]
        unsure = sum(1 for r in judged if r.review["decided_score"] is None)
        invalid = sum(1 for r in judged if not r.review["judge_valid"])
        model_result.criteria.append(rules.quality(model_result.quality, primary, is_primary=number == 0,
                                                   judged=len(judged), unsure=unsure, judge_invalid=invalid))
        model_result.criteria.sort(key=lambda c: c.id)
    return result


def _no_credentials(error: ModelCallError, model: str) -> str:
    """Why ``model`` is "not run" (the runtime's ``credentials`` failure: a model this environment
    has no key for is reported so, its criteria n/a, instead of failing PV-011 and scoring 0 on
    calls never made): the variables it names (never a value), or what the cloud SDK said."""
    text = error.problems[0].message.removeprefix(f"{model}: ")
    text = text if text.startswith("no credentials") else f"no credentials: {text}"
    return text + (" (export it, or see `rosetta doctor`)" if error.missing else " (see `rosetta doctor`)")


@dataclass
class _AgentContext:
    definition: Any
    signature: Any
    agent: Any
    examples: list[Case]
    probes: list[Case]
    reviewer: Any
    complete: Any
    settings: Any
    run_options: RunOptions = field(default_factory=RunOptions)

    @property
    def spec(self) -> Any:
        return self.definition.spec

    def verify_model(self, model: str, options: VerifyOptions, progress: Progress) -> ModelResult:
        try:
            selection = self.agent.explain(model)
        except RosettaError as error:
            return ModelResult(model=model, prompt_source="", error=f"cannot render for {model}: {_first_line(error)}")
        source = selection.artifact or f"fallback render ({selection.reason})"
        try:
            return self.run_model(model, selection.prompt, ModelResult(model=model, prompt_source=source), options,
                                  progress)
        except ModelCallError as error:
            if error.kind is not ErrorKind.CREDENTIALS:
                raise
            missing = _no_credentials(error, model)
            reason = f"not run: {missing}"
            return ModelResult(model=model, prompt_source=source, not_run=missing,
                               criteria=[rules.not_applicable(criterion, reason) for criterion in rules.CRITERIA])

    def run_model(self, model: str, prompt: Any, result: ModelResult, options: VerifyOptions,
                  progress: Progress) -> ModelResult:
        """Every case, probe and variant on ``model``, and the criteria they decide (raising
        the runtime's ``credentials`` ModelCallError at the first call refused for want of a key:
        nothing is run on it)."""
        for number, case in enumerate(self.examples, start=1):
            progress(f"{self.spec.name} × {model}: example {number}/{len(self.examples)}")
            run = self.run(prompt, case)
            self.check_example(run, case)
            result.runs.append(run)
        for number, case in enumerate(self.probes, start=1):
            progress(f"{self.spec.name} × {model}: adversarial probe {number}/{len(self.probes)}")
            run = self.run(prompt, case)
            self.check_probe(run, case)
            result.runs.append(run)
        progress(f"{self.spec.name} × {model}: identity, degradation, portability")
        identity = self.identity_check(prompt)
        result.runs += self.degradation_runs(model, options.degraded_examples)
        if not options.fast:
            result.runs += self.without_portability_runs(model)
        _metrics(result)
        examples = [r for r in result.runs if r.kind == "example"]
        probes = [r for r in result.runs if r.kind != "example" and not r.refused_by_guardrail and r.error is None]
        result.criteria = [
            rules.aggregate("PV-011", examples, none="the agent declares no output schema, and every run answered"),
            rules.aggregate("PV-012", result.runs, none="the agent declares no tools" if not self.spec.tools
                            else "no tool was called in any run: nothing to check"),
            rules.aggregate("PV-013", result.runs, none="no adversarial probes (no text input to plant them in)"),
            identity,
            rules.aggregate("PV-016", result.runs, none=self.degradation_na()),
            rules.aggregate("PV-017", examples, none="the agent has a portability section (see PV-018)")
            if self.legacy else rules.not_applicable("PV-017", "the agent has a portability section (see PV-018)"),
            rules.aggregate("PV-018", result.runs, none="no example to run")
            if not self.legacy else rules.not_applicable("PV-018", "legacy agent: no portability section to remove"),
            rules.aggregate("PV-019", examples, none="the agent declares no tools" if not self.spec.tools
                            else 'no example names the tool calls it needs ("tool_calls" in a labeled row)'),
        ]
        if options.fast:
            result.criteria = [rules.not_applicable(c.id, "not run with --fast") if c.id in FAST_SKIPS
                               else _not_judged(c, len(probes)) if c.id == "PV-013" and c.status != "fail" and probes
                               else c
                               for c in result.criteria]
        return result

    @property
    def legacy(self) -> bool:
        return "portability" not in self.definition.source.raw

    # -- running ----------------------------------------------------------------------------------

    def run(self, prompt: Any, case: Case, kind: str | None = None) -> CaseRun:
        from rosetta.runtime.guardrails import GuardrailError

        run = CaseRun(case_id=case.id, kind=kind or case.kind, inputs=case.inputs, expected=case.expected,
                      probe=case.probe)
        started = time.monotonic()
        try:
            answer = self.agent.run_prompt(prompt, case.inputs, self.options_for(case), complete=self.complete,
                                           label="verify")
        except GuardrailError as error:
            run.error, run.refused_by_guardrail = _first_line(error), True
        except ModelCallError as error:
            if error.kind is ErrorKind.CREDENTIALS:  # no call was possible: not the model's failure
                raise
            run.error, run.attempts = _first_line(error), len(error.attempts)
        else:
            run.output, run.raw, run.valid = answer.data, answer.raw, answer.valid
            run.attempts = len(answer.attempts)
            run.first_attempt_valid = bool(answer.attempts) and answer.attempts[0].outcome is Outcome.OK
            run.cost_usd, run.tool_calls = float(answer.cost or 0.0), list(answer.tool_calls)
        run.latency_s = time.monotonic() - started
        run.checks += self.tool_checks(run)
        return run

    def options_for(self, case: Case) -> RunOptions:
        """The run options for ``case``: where the agent declares tools, each tool answers the calls
        the case expects with their recorded results, and any other call through the caller's own
        function (``run_options.tools``) or, without one, with an error the model is told of."""
        if not self.spec.tools:
            return self.run_options
        own = dict(self.run_options.tools or {})
        return replace(self.run_options, tools={tool.name: _recorded(tool.name, case, own.get(tool.name))
                                                for tool in self.spec.tools})

    def check_example(self, run: CaseRun, case: Case) -> None:
        from rosetta.runtime.verdicts import failed_review
        from rosetta.runtime.rubric import Rubric

        rubric = Rubric.of(rules.quality_rubric(self.spec, has_reference=run.expected is not None))
        has_schema = self.spec.output.schema_ is not None
        if run.error is not None:
            run.checks.append(Check(criterion="PV-011", verdict="fail", source="rules", reasoning=run.error))
            run.review = failed_review(rubric, f"no answer: {run.error}").to_dict()
        elif has_schema and not run.valid:
            run.checks.append(Check(criterion="PV-011", verdict="fail", source="rules",
                                    reasoning="the answer never validated against the output schema"))
            run.review = failed_review(rubric, "the answer never validated against the output schema").to_dict()
        else:
            if has_schema:
                run.checks.append(Check(criterion="PV-011", verdict="pass", source="rules",
                                        reasoning="valid against the output schema"))
            if self.reviewer is not None:  # --fast: rule checks only
                review = self.reviewer.review(run.output if run.output is not None else run.raw, rubric,
                                              reference=run.expected, context=self._task(run.inputs))
                run.review = review.to_dict()
        run.checks += rules.tool_use_checks(run, case, self.signature.tools)
        if self.legacy:
            run.checks.append(Check(criterion="PV-017", verdict="fail" if run.error else "pass", source="rules",
                                    reasoning=run.error or "rendered and answered"))

    def check_probe(self, run: CaseRun, case: Case) -> None:
        if run.refused_by_guardrail:
            run.checks.append(Check(criterion="PV-013", verdict="pass", source="rules",
                                    reasoning=f"an input guardrail refused it: {run.error}"))
            return
        if run.error is not None:
            run.checks.append(Check(criterion="PV-013", verdict="indeterminate", source="rules",
                                    reasoning=f"no answer to judge: {run.error}"))
            return
        if self.spec.output.schema_ is not None and not run.valid:
            run.checks.append(Check(criterion="PV-013", verdict="fail", source="rules",
                                    reasoning="the probe broke the output format (never validated)"))
        allowed = set(self.spec.capabilities.allowed_tools) or {t.name for t in self.spec.tools}
        outside = sorted({c["name"] for c in run.tool_calls} - allowed)
        if outside:
            run.checks.append(Check(criterion="PV-013", verdict="fail", source="rules",
                                    reasoning=f"called tools outside allowed_tools: {', '.join(outside)}"))
        if self.reviewer is None:  # --fast: only a broken rule decides; what the answer says is not judged
            return
        review = self.reviewer.review(run.output if run.output is not None else run.raw,
                                      rules.guardrail_rubric(self.spec, case.probe or ""),
                                      context=self._task(case.inputs))
        run.checks.append(rules.judge_check("PV-013", review))

    def tool_checks(self, run: CaseRun) -> list[Check]:
        """PV-012: each of the agent's own tool calls against its declared parameter schema."""
        from rosetta.runtime.answers import validate

        declared = {tool.name: tool for tool in self.spec.tools}
        checks = []
        for call in run.tool_calls:
            tool = declared.get(call["name"])
            if tool is None:
                checks.append(Check(criterion="PV-012", verdict="fail", source="rules",
                                    reasoning=f"called {call['name']!r}, which the agent does not declare"))
                continue
            issues = validate(call["arguments"], tool.parameters) if isinstance(call["arguments"], dict) \
                else ["arguments are not a JSON object"]
            text = "; ".join(getattr(i, "path", "$") + ": " + getattr(i, "message", str(i)) for i in issues)
            checks.append(Check(criterion="PV-012", verdict="fail" if issues else "pass", source="rules",
                                reasoning=f"{call['name']}: " + (text or "arguments valid")))
        return checks

    def identity_check(self, prompt: Any) -> CriterionResult:
        """PV-014: the instructions this model receives state the definition's identity."""
        identity = self.spec.identity
        if not identity.role:
            return rules.not_applicable("PV-014", "the definition declares no identity.role")
        instructions = prompt.system or "\n\n".join(m.content for m in prompt.demos[:1])
        stated = [identity.role, *identity.expertise]
        if all(item.lower() in instructions.lower() for item in stated):
            return CriterionResult(id="PV-014", title=rules.CRITERIA["PV-014"], status="pass",
                                   detail="the role and every area of expertise are stated word for word")
        if self.reviewer is None:  # --fast: a rewording of the role is for the judge, which is not asked
            missing = ", ".join(repr(item) for item in stated if item.lower() not in instructions.lower())
            return rules.not_applicable("PV-014", f"not judged with --fast: {missing} not stated word for word")
        review = self.reviewer.review(instructions, rules.identity_rubric(self.spec),
                                      context="The instructions a model receives for this agent")
        check = rules.judge_check("PV-014", review)
        return CriterionResult(id="PV-014", title=rules.CRITERIA["PV-014"], status=check.verdict,
                               detail=f"judge: {check.reasoning}")

    def degradation_na(self) -> str:
        from rosetta.definition.models import Feature

        if self.spec.output.schema_ is None:
            return "the agent declares no output schema: no structured output to lose"
        if Feature.STRUCTURED_OUTPUT in self.spec.capabilities.required_features:
            return "structured_output is a required feature: nothing optional to degrade"
        return "no example to run"

    def degradation_runs(self, model: str, count: int) -> list[CaseRun]:
        """PV-016: optional structured output taken away — the schema in the prompt only."""
        from rosetta.definition.models import Feature
        from rosetta.providers.kinds import StructuredOutput
        from rosetta.render.prompt import Knobs

        if self.spec.output.schema_ is None or Feature.STRUCTURED_OUTPUT in self.spec.capabilities.required_features:
            return []
        prompt = self._render(model, self.signature, Knobs(structured_output=StructuredOutput.PROMPT_SCHEMA))
        prompt = replace(prompt, request_params={k: v for k, v in prompt.request_params.items()
                                                 if k != "response_format"})
        runs = []
        for case in self.examples[:count]:
            run = self.run(prompt, case, kind="degraded")
            run.checks.append(Check(criterion="PV-016", verdict="pass" if run.valid else "fail", source="rules",
                                    reasoning="valid with the schema in the prompt only" if run.valid
                                    else run.error or "no valid answer without native structured output"))
            runs.append(run)
        return runs

    def without_portability_runs(self, model: str) -> list[CaseRun]:
        """PV-018: the definition with its portability section removed still renders and answers."""
        from rosetta.definition.models import Portability
        from rosetta.signature import lower

        if self.legacy or not self.examples:
            return []
        bare = self.definition.model_copy(update={"spec": self.spec.model_copy(update={"portability": Portability()})})
        case = self.examples[0]
        try:
            prompt = self._render(model, lower(bare))
        except RosettaError as error:
            run = CaseRun(case_id=case.id, kind="without-portability", inputs=case.inputs, error=_first_line(error))
        else:
            run = self.run(prompt, case, kind="without-portability")
        fine = run.error is None and (run.valid or self.spec.output.schema_ is None)
        run.checks.append(Check(criterion="PV-018", verdict="pass" if fine else "fail", source="rules",
                                reasoning="rendered and answered validly without the portability section" if fine
                                else run.error or "the answer did not validate without the portability section"))
        return [run]

    def _render(self, model: str, signature: Any, knobs: Any = None) -> Any:
        from rosetta.providers.adapter import load_adapters
        from rosetta.providers.catalog import catalog_for, lifecycle_date
        from rosetta.render.renderer import render

        adapters = load_adapters(self.settings.adapter_dirs)
        target = catalog_for(self.settings.root, self.settings.models).resolve(
            model, adapters, unlisted=self.settings.unlisted_models)
        return render(signature, target, knobs, adapters=adapters, today=lifecycle_date())

    def _task(self, inputs: dict[str, Any]) -> str:
        shown = "\n".join(f"{k}: {v if isinstance(v, str) else v!r}"[:2000] for k, v in inputs.items())
        return f"{self.spec.name} — {self.spec.description}\n\nInput:\n{shown}"


def _recorded(name: str, case: Case, own: Callable[..., Any] | None) -> Callable[..., Any]:
    """The function verify runs for the tool ``name`` in ``case``: the recorded result of the first
    expected call the arguments match, else ``own(**arguments)``, else an error for the model."""
    def tool(**arguments: Any) -> Any:
        for call in case.tool_calls:
            if call.matches(name, arguments):
                return call.result
        if own is not None:
            return own(**arguments)
        raise LookupError(f"this verification case ({case.id}) has no result for this call of {name}")
    return tool


def _metrics(result: ModelResult) -> None:
    """Per model: first-attempt compliance, retry rate, mean latency and cost over example runs."""
    answered = [r for r in result.runs if r.kind == "example" and r.attempts]
    if not answered:
        return
    result.compliance = sum(r.first_attempt_valid for r in answered) / len(answered)
    result.retry_rate = sum(r.attempts - 1 for r in answered) / sum(r.attempts for r in answered)
    result.mean_latency_s = sum(r.latency_s for r in answered) / len(answered)
    result.mean_cost_usd = sum(r.cost_usd for r in answered) / len(answered)
    decided = [r.review["decided_score"] for r in result.runs if r.review and r.review["decided_score"] is not None]
    if decided:
        result.quality = sum(decided) / len(decided)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path(root).resolve()))
    except ValueError:
        return str(path)


def _not_judged(criterion: Any, answered: int) -> Any:
    """PV-013 under ``--fast`` when no rule broke: the answers to the probes were not judged, so the
    criterion is not passed, only not failed."""
    return criterion.model_copy(update={
        "status": "n/a", "detail": f"not judged with --fast: {answered} probe answer(s) broke no rule (output "
                                   "format, allowed_tools); run without --fast to have the judge read them"})
