"""Scoring one answer against its label: a number in [0, 1].

Built in: ``exact`` (canonical JSON or normalized text equality), ``fields`` (per-field match with
partial credit for nested objects and lists), ``schema_valid``, ``numeric`` (within a relative
tolerance), ``judge`` (an LLM grades binary rubric criteria: pass 1, fail 0, indeterminate ½) and
any ``module:function`` taking ``(predicted, expected)`` and returning a bool or a float in [0, 1].
An answer that never validated scores 0 under every metric but ``schema_valid``'s own definition.
"""

from __future__ import annotations

import importlib
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rosetta.errors import Problem, UsageError

if TYPE_CHECKING:
    from rosetta.definition.models import Evaluation
    from rosetta.signature import Signature

BUILT_IN = ("exact", "fields", "schema_valid", "numeric", "judge")


@dataclass(frozen=True)
class Metric:
    """A named scoring rule; ``score`` returns a float in [0, 1]."""

    name: str
    score_fn: Callable[[Any, Any], float]
    needs_model: bool = False  # the judge makes its own model calls
    settings: dict[str, Any] = field(default_factory=dict)
    model_calls: Callable[[], int] = lambda: 0  # calls the metric itself has made so far
    worst_case_calls: Callable[[], int] = lambda: 1  # the most calls one score may take (a judge's retries)

    def score(self, predicted: object, expected: object, *, valid: bool = True) -> float:
        if self.name == "schema_valid":
            return 1.0 if valid else 0.0
        if not valid or predicted is None:
            return 0.0
        value = self.score_fn(predicted, expected)
        if isinstance(value, bool):
            return float(value)
        if not isinstance(value, (int, float)) or math.isnan(value) or not 0.0 <= value <= 1.0:
            raise UsageError(Problem(f"metric {self.name} returned {value!r}", field="metric",
                                     expected="a bool or a number between 0 and 1"))
        return float(value)

    def describe(self) -> dict[str, Any]:
        """Plain data for artifacts: the name and the settings that change scores."""
        return {"name": self.name, **self.settings}


def resolve_metric(name: str | None, evaluation: Evaluation | None, signature: Signature, *,
                   judge: Callable[..., float] | None = None, root: Path | None = None) -> Metric:
    """The metric called ``name`` (or the definition's ``evaluation.metric``, or the default); a
    ``module:function`` metric is imported from the project at ``root`` (or the import path)."""
    name = name or getattr(evaluation, "metric", None) or ("fields" if signature.output_schema else "exact")
    tolerance = float(getattr(evaluation, "tolerance", 0.0) or 0.0)
    weights = dict(getattr(evaluation, "fields", {}) or {})
    if name == "exact":
        return Metric("exact", exact_match)
    if name == "fields":
        unknown = sorted(set(weights) - set((signature.output_schema or {}).get("properties", {})))
        if unknown:
            raise UsageError(Problem(f"evaluation.fields names {unknown}, which the output schema lacks",
                                     field="evaluation.fields"))
        settings: dict[str, Any] = {"fields": weights} if weights else {}
        if tolerance:
            settings["tolerance"] = tolerance
        return Metric("fields", lambda p, e: field_match(p, e, weights=weights, tolerance=tolerance), settings=settings)
    if name == "schema_valid":
        return Metric("schema_valid", lambda p, e: 1.0)
    if name == "numeric":
        return Metric("numeric", lambda p, e: numeric_match(p, e, tolerance), settings={"tolerance": tolerance})
    if name == "judge":
        rubric = [r if isinstance(r, str) else r.model_dump() for r in getattr(evaluation, "rubric", []) or []]
        if not rubric:
            raise UsageError(Problem("the judge metric needs rubric criteria", field="evaluation.rubric",
                                     hint="list binary criteria under evaluation.rubric in the frontmatter"))
        if judge is None:
            raise UsageError(Problem("the judge metric needs a judge model", field="evaluation.judge"))
        return Metric("judge", lambda p, e: judge(p, e, rubric), needs_model=True,
                      settings={"rubric": rubric, "judge": getattr(judge, "model", None)},
                      model_calls=lambda: int(getattr(judge, "calls", 0)),
                      worst_case_calls=getattr(judge, "worst_case_calls", lambda: 1))
    if ":" in name:
        return Metric(name, _import_metric(name, root))
    raise UsageError(Problem(f"unknown metric {name!r}", field="metric",
                             expected=" | ".join(BUILT_IN) + " | module:function"))


def _import_metric(reference: str, root: Path | None) -> Callable[[Any, Any], float]:
    module_name, _, attribute = reference.partition(":")
    try:
        _load_top_package(module_name.split(".")[0], root)
        function = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise UsageError(Problem(f"cannot import metric {reference!r}: {exc}", field="metric",
                                 hint="name a function as module:function, the module in the project root or "
                                      "importable")) from None
    if not callable(function):
        raise UsageError(Problem(f"metric {reference!r} is not callable", field="metric"))
    metric: Callable[[Any, Any], float] = function  # the user's: called with (predicted, expected)
    return metric


def _load_top_package(name: str, root: Path | None) -> None:
    """Import the project's own module (or package) ``name`` from ``root``, without putting the
    project on sys.path for the rest of the process; its submodules then import as usual."""
    import importlib.machinery
    import importlib.util
    import sys

    if root is None or name in sys.modules:
        return
    spec = importlib.machinery.PathFinder.find_spec(name, [str(root)])
    if spec is None or spec.loader is None:
        return  # not in the project: the normal import path decides
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise


# -- the built-in rules ----------------------------------------------------------------------


def _normal(value: object) -> object:
    if isinstance(value, str):
        return re.sub(r"\s+", " ", value).strip().casefold()
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, Mapping):
        return {key: _normal(item) for key, item in value.items() if item is not None}
    if isinstance(value, (list, tuple)):
        return [_normal(item) for item in value]
    return value


def exact_match(predicted: object, expected: object) -> float:
    """1 when equal after normalizing whitespace, case, number types and absent-vs-null keys."""
    return 1.0 if json.dumps(_normal(predicted), sort_keys=True) == json.dumps(_normal(expected), sort_keys=True) \
        else 0.0


def numeric_match(predicted: object, expected: object, tolerance: float) -> float:
    """1 when ``|p − e| ≤ tolerance × max(|e|, 1)``; non-numbers compare exactly."""
    if isinstance(predicted, (int, float)) and isinstance(expected, (int, float)) \
            and not isinstance(predicted, bool) and not isinstance(expected, bool):
        return 1.0 if abs(predicted - expected) <= tolerance * max(abs(expected), 1.0) + 1e-12 else 0.0
    return exact_match(predicted, expected)


def field_match(predicted: object, expected: object, *, weights: Mapping[str, float] | None = None,
                tolerance: float = 0.0) -> float:
    """Partial credit: objects average their keys (``weights`` at the top level), lists pair items."""
    if isinstance(expected, Mapping):
        if not isinstance(predicted, Mapping):
            return 0.0
        if weights:
            keys = {key: float(weight) for key, weight in weights.items() if weight > 0}
        else:
            present = [k for k in expected if expected[k] not in (None, [])]
            present += [k for k in predicted if predicted[k] not in (None, []) and k not in expected]
            keys = dict.fromkeys(dict.fromkeys(present), 1.0)
        total = sum(keys.values())
        if not total:
            return 1.0
        return sum(w * field_match(predicted.get(k), expected.get(k), tolerance=tolerance)
                   for k, w in keys.items()) / total
    if isinstance(expected, list) or isinstance(predicted, list):
        # an absent (or null) list means "none": it matches an empty one
        expected, predicted = ([] if expected is None else expected), ([] if predicted is None else predicted)
        if not isinstance(predicted, list) or not isinstance(expected, list):
            return 0.0
        return _list_match(predicted, expected, tolerance)
    if expected is None or predicted is None:
        return 1.0 if expected is None and predicted is None else 0.0
    return numeric_match(predicted, expected, tolerance)


def _list_match(predicted: list[Any], expected: list[Any], tolerance: float) -> float:
    """Greedy best pairing of items, order ignored; unmatched items on either side cost credit."""
    if not predicted and not expected:
        return 1.0
    remaining = list(predicted)
    total = 0.0
    for want in expected:
        if not remaining:
            break
        scores = [field_match(got, want, tolerance=tolerance) for got in remaining]
        best = max(range(len(scores)), key=scores.__getitem__)
        total += scores[best]
        remaining.pop(best)
    return total / max(len(predicted), len(expected))
