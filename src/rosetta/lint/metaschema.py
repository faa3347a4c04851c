"""Checking JSON Schemas against their metaschema, fast enough to lint thousands of definitions.

jsonschema validates against the draft 2020-12 metaschema by resolving ``$dynamicRef`` through
seven vocabulary documents on every node, which costs ~4 ms per schema. The vocabularies only
add ``properties`` to one ``{type: [object, boolean]}`` shape, so we merge them once into a single
equivalent document whose ``$dynamicRef: "#meta"`` becomes ``$ref: "#"``, and let jsonschema
validate against that (~5x faster). ``tests/lint/test_metaschema.py`` checks that both agree.
Schemas that name another draft in ``$schema`` use jsonschema's own metaschema for it.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from functools import cache
from typing import Any

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
_VOCABULARY_KEYS = ("$schema", "$id", "$vocabulary", "$dynamicAnchor", "title", "type", "$comment", "allOf")


def _rewrite(node: Any, base: str) -> Any:
    """Point every reference of a vocabulary document at the merged document."""
    if isinstance(node, list):
        return [_rewrite(item, base) for item in node]
    if not isinstance(node, dict):
        return node
    result = {}
    for key, value in node.items():
        if key == "$dynamicRef" and value == "#meta":
            result["$ref"] = "#"
        elif key == "$ref" and isinstance(value, str):
            fragment = value.split("#", 1)[1] if "#" in value else ""
            result["$ref"] = "#" + fragment
        else:
            result[key] = _rewrite(value, base)
    return result


@cache
def merged_2020_12_metaschema() -> dict[str, Any]:
    """The draft 2020-12 metaschema as one self-contained document (built once per process)."""
    from urllib.parse import urljoin

    from jsonschema_specifications import REGISTRY

    root = REGISTRY.contents(DRAFT_2020_12)
    documents = [REGISTRY.contents(urljoin(DRAFT_2020_12, part["$ref"])) for part in root["allOf"]] + [root]
    merged: dict[str, Any] = {"$schema": DRAFT_2020_12, "type": ["object", "boolean"], "properties": {}, "$defs": {}}
    for document in documents:
        document = copy.deepcopy(document)
        for key in ("properties", "$defs"):
            for name, value in document.pop(key, {}).items():
                if name in merged[key] and merged[key][name] != value:
                    raise RuntimeError(f"metaschema vocabularies disagree on {key}/{name}")
                merged[key][name] = value
        leftover = set(document) - set(_VOCABULARY_KEYS)
        if leftover:
            raise RuntimeError(f"unexpected metaschema keywords {sorted(leftover)}")
    return _rewrite(merged, DRAFT_2020_12)


@cache
def _validator_for_draft(uri: str | None) -> Any:
    from jsonschema.validators import Draft202012Validator, validator_for

    if uri in (None, DRAFT_2020_12, DRAFT_2020_12 + "#"):
        return Draft202012Validator(merged_2020_12_metaschema())
    cls = validator_for({"$schema": uri}, default=Draft202012Validator)
    if cls is Draft202012Validator:
        return Draft202012Validator(merged_2020_12_metaschema())
    return cls(cls.META_SCHEMA)


def metaschema_errors(schema: Any) -> Iterator[tuple[tuple, str]]:
    """(path inside ``schema``, message) for each way it breaks its JSON Schema metaschema."""
    if not isinstance(schema, (dict, bool)):
        yield (), f"a JSON Schema must be a mapping or a boolean, got {type(schema).__name__}"
        return
    declared = schema.get("$schema") if isinstance(schema, dict) else None
    validator = _validator_for_draft(declared if isinstance(declared, str) else None)
    for error in validator.iter_errors(schema):
        yield tuple(error.absolute_path), error.message
