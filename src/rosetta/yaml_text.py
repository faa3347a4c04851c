"""Readable YAML output: long and multi-line strings as block scalars, keys in the order given.

Used wherever rosetta writes YAML for people to read and diff (rendered prompts, artifacts).
"""

from __future__ import annotations

from typing import Any

import yaml


class _ReadableDumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # libyaml's emitter: ~8x faster
    """SafeDumper that writes multi-line strings as ``|`` blocks and never emits anchors/aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True  # a shared object is written out twice: readable, and safe for any reader


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value:
        # block scalars cannot carry trailing spaces on a line; fall back to quoted style there
        style = "|" if not any(line != line.rstrip() for line in value.split("\n")) else '"'
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_ReadableDumper.add_representer(str, _represent_str)


def dump_yaml(data: Any) -> str:
    """``data`` (plain dicts, lists, scalars) as readable, stable YAML."""
    return yaml.dump(data, Dumper=_ReadableDumper, sort_keys=False, allow_unicode=True, width=100,
                     default_flow_style=False)
