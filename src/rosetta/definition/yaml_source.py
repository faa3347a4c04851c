"""Safe YAML with positions: parse untrusted frontmatter into plain values plus a map of where each
value came from.

PyYAML's composer is recursive (the C one segfaults on deeply nested input) and happily expands
alias bombs, so we build values ourselves from libyaml's event stream: an explicit stack bounds
the depth, a node budget bounds alias expansion, duplicate keys are errors, and only the standard
YAML tags are allowed (no Python object tags). Every mapping key and sequence item records its
line and column, which is how lint findings and schema errors point at the right line.
"""

from __future__ import annotations

import copy

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.events import (
    AliasEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from yaml.nodes import ScalarNode

from rosetta.errors import DefinitionError, Location

MAX_YAML_CHARS = 1_000_000
"""Frontmatter and sidecars are metadata; anything bigger is a mistake or an attack."""
MAX_DEPTH = 64
"""Deepest nesting of mappings and sequences we accept (JSON Schemas rarely pass 10)."""
MAX_NODES = 200_000
"""Total values after alias expansion; stops "billion laughs" documents early."""

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_STANDARD = "tag:yaml.org,2002:"
_SCALAR_TAGS = {_STANDARD + t for t in ("str", "int", "float", "bool", "null", "timestamp")}
_STR_TAG = _STANDARD + "str"

FieldPath = tuple[str | int, ...]


@dataclass
class SourceMap:
    """Where each value of a parsed document sits: field path → (line, column), 1-based."""

    file: str
    positions: dict[FieldPath, tuple[int, int]] = field(default_factory=dict)

    def locate(self, path: FieldPath) -> Location:
        """The position of ``path`` or, failing that, of its nearest ancestor that has one."""
        for end in range(len(path), -1, -1):
            found = self.positions.get(tuple(path[:end]))
            if found:
                return Location(self.file, found[0], found[1])
        return Location(self.file)


@dataclass
class _Frame:
    value: dict[str, Any] | list[Any]
    path: FieldPath
    anchor: str | None
    nodes: int = 1
    key: tuple[str, int, int] | None = None  # mapping key waiting for its value
    merges: list[Any] = field(default_factory=list)
    explicit_keys: set[str] = field(default_factory=set)


def format_path(path: FieldPath) -> str:
    """``("tools", 0, "parameters")`` → ``tools[0].parameters``."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


class _Builder:
    """Turns libyaml events into Python values; one instance per document."""

    def __init__(self, text: str, file: str, first_line: int) -> None:
        self.loader = _LOADER(text)
        self.file = file
        self.first_line = first_line
        self.source_map = SourceMap(file)
        self.stack: list[_Frame] = []
        self.anchors: dict[str, tuple[Any, int]] = {}
        self.open_anchors: set[str] = set()
        self.nodes = 0
        self.root: Any = None
        self.has_root = False
        self.resolve = self.loader.resolve
        self.constructors = self.loader.yaml_constructors

    def error(self, message: str, mark: Any, *, hint: str | None = None, path: FieldPath = ()) -> DefinitionError:
        line, column = self.position(mark)
        return DefinitionError.at(
            message, file=self.file, line=line, column=column, field=format_path(path) or None, hint=hint
        )

    def position(self, mark: Any) -> tuple[int, int]:
        return mark.line + self.first_line, mark.column + 1

    def build(self) -> Any:
        handlers: dict[type, Callable[[Any], None]] = {  # each takes the event of its type
            ScalarEvent: self.on_scalar,
            MappingStartEvent: self.on_start,
            SequenceStartEvent: self.on_start,
            MappingEndEvent: self.on_end,
            SequenceEndEvent: self.on_end,
            AliasEvent: self.on_alias,
        }
        get_event = self.loader.get_event
        documents = 0
        try:
            while (event := get_event()) is not None:
                handler = handlers.get(type(event))
                if handler is not None:
                    handler(event)
                elif isinstance(event, DocumentStartEvent):
                    documents += 1
                    if documents > 1:
                        raise self.error(
                            "more than one YAML document", event.start_mark,
                            hint="remove the extra '---' line; a definition holds one document",
                        )
                elif isinstance(event, StreamEndEvent):
                    break
        finally:
            self.loader.dispose()
        return self.root

    # -- events ---------------------------------------------------------------------------

    def count(self, n: int, mark: Any) -> None:
        self.nodes += n
        if self.nodes > MAX_NODES:
            raise self.error(
                f"document expands to more than {MAX_NODES:,} values",
                mark,
                hint="this looks like an alias bomb ('billion laughs'); remove the nested aliases",
            )

    def on_scalar(self, event: ScalarEvent) -> None:
        self.count(1, event.start_mark)
        top = self.stack[-1] if self.stack else None
        if top is not None and top.key is None and isinstance(top.value, dict):
            mark = event.start_mark
            top.key = (event.value, mark.line + self.first_line, mark.column + 1)  # keys keep their source text
            return
        tag = event.tag
        if tag is None or tag == "!":
            if not event.implicit[0]:
                self.attach(event.value, event, 1)  # quoted or block scalar: always text
                return
            tag = self.resolve(ScalarNode, event.value, event.implicit)
        if tag == _STR_TAG:
            self.attach(event.value, event, 1)
            return
        if tag not in _SCALAR_TAGS:
            raise self.error(
                f"YAML tag {event.tag!r} is not allowed", event.start_mark,
                hint="only plain values, lists and mappings are accepted; remove the tag",
            )
        node = ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)
        try:
            value = self.constructors[tag](self.loader, node)
        except (yaml.YAMLError, ValueError) as exc:
            kind = tag.removeprefix(_STANDARD)
            raise self.error(f"invalid {kind} value {event.value!r}: {exc}", event.start_mark) from None
        self.attach(value, event, 1)

    def on_start(self, event: MappingStartEvent | SequenceStartEvent) -> None:
        self.count(1, event.start_mark)
        is_map = isinstance(event, MappingStartEvent)
        allowed = {None, "!", _STANDARD + ("map" if is_map else "seq")}
        if event.tag not in allowed:
            raise self.error(
                f"YAML tag {event.tag!r} is not allowed", event.start_mark,
                hint="only plain values, lists and mappings are accepted; remove the tag",
            )
        if self.stack and isinstance(self.stack[-1].value, dict) and self.stack[-1].key is None:
            raise self.error(
                "a mapping key must be a plain value, not a list or mapping", event.start_mark,
                hint="write the key as text, e.g. 'name:'",
            )
        if len(self.stack) >= MAX_DEPTH:
            raise self.error(
                f"nested more than {MAX_DEPTH} levels deep", event.start_mark,
                hint="flatten the structure; agent metadata never needs this depth",
            )
        container: dict[str, Any] | list[Any] = {} if is_map else []
        path = self.attach(container, event, 0)
        if event.anchor:
            self.open_anchors.add(event.anchor)
        self.stack.append(_Frame(container, path, event.anchor))

    def on_end(self, _event: Any = None) -> None:
        frame = self.stack.pop()
        if isinstance(frame.value, dict):
            for merged in frame.merges:
                for key, value in merged.items():
                    if key not in frame.explicit_keys and key not in frame.value:
                        frame.value[key] = value
        if frame.anchor:
            self.open_anchors.discard(frame.anchor)
            self.anchors[frame.anchor] = (frame.value, frame.nodes)
        if self.stack:
            self.stack[-1].nodes += frame.nodes

    def on_alias(self, event: AliasEvent) -> None:
        if event.anchor in self.open_anchors:
            raise self.error(f"alias *{event.anchor} refers to itself", event.start_mark,
                             hint="recursive structures are not allowed; remove the alias")
        if event.anchor not in self.anchors:
            raise self.error(f"alias *{event.anchor} has no matching anchor &{event.anchor}", event.start_mark,
                             hint="define the anchor before using it")
        value, nodes = self.anchors[event.anchor]
        self.count(nodes, event.start_mark)
        if self.stack and isinstance(self.stack[-1].value, dict) and self.stack[-1].key is None:
            raise self.error("an alias cannot be used as a mapping key", event.start_mark)
        # a copy per use: values shared between two places would change together (setting an unread
        # value aside at one path removed it from the other); the node budget bounds the copying
        self.attach(copy.deepcopy(value) if isinstance(value, (dict, list)) else value, event, nodes)

    def attach(self, value: Any, event: Any, nodes: int) -> FieldPath:
        """Put ``value`` into the open container (or make it the root); return its field path."""
        if event.anchor and not isinstance(value, (dict, list)):
            self.anchors[event.anchor] = (value, 1)
        if not self.stack:
            self.root, self.has_root = value, True
            return ()
        frame = self.stack[-1]
        frame.nodes += nodes
        line, column = self.position(event.start_mark)
        if isinstance(frame.value, list):
            path = (*frame.path, len(frame.value))
            frame.value.append(value)
            self.source_map.positions[path] = (line, column)
            return path
        assert frame.key is not None
        key, key_line, key_column = frame.key
        frame.key = None
        if key == "<<":
            merged = value if isinstance(value, list) else [value]
            if not all(isinstance(m, dict) for m in merged):
                raise self.error("'<<' merges only mappings", event.start_mark, path=frame.path)
            frame.merges.extend(merged)
            return (*frame.path, key)
        path = (*frame.path, key)
        if key in frame.explicit_keys:
            first = self.source_map.positions[path][0]
            raise DefinitionError.at(
                f"duplicate key {key!r} (first defined on line {first})",
                file=self.file, line=key_line, column=key_column, field=format_path(path),
                hint="YAML keeps only one of them; delete or merge the duplicate",
            )
        frame.explicit_keys.add(key)
        frame.value[key] = value
        self.source_map.positions[path] = (key_line, key_column)
        return path


def parse_yaml(text: str, *, file: str, first_line: int = 1) -> tuple[Any, SourceMap]:
    """Parse one YAML document safely; ``first_line`` is the file line where ``text`` begins.

    Returns the value (``None`` for an empty document) and its :class:`SourceMap`. Raises
    :class:`DefinitionError` with the file position for every problem.
    """
    if len(text) > MAX_YAML_CHARS:
        raise DefinitionError.at(
            f"YAML is {len(text):,} characters; the limit is {MAX_YAML_CHARS:,}",
            file=file, line=first_line,
            hint="keep large data (examples, schemas) in separate files and reference them",
        )
    builder = _Builder(text, file, first_line)
    try:
        value = builder.build()
    except yaml.MarkedYAMLError as exc:
        raise _syntax_error(exc, text, file, first_line) from None
    except yaml.YAMLError as exc:  # errors without a mark
        raise DefinitionError.at(f"invalid YAML: {exc}", file=file, line=first_line) from None
    except RecursionError:
        raise DefinitionError.at("YAML is nested too deeply", file=file, line=first_line) from None
    return value, builder.source_map


def _syntax_error(exc: yaml.MarkedYAMLError, text: str, file: str, first_line: int) -> DefinitionError:
    lines = text.split("\n")
    mark = exc.problem_mark or exc.context_mark
    context = exc.context_mark
    if context is not None and mark is not None and mark.index >= len(text.rstrip()):
        mark = context  # the parser ran off the end: point at what was left open instead
    line = column = None
    hint = "check indentation and quoting around this line"
    if mark is not None:
        line, column = mark.line + first_line, mark.column + 1
        source_line = lines[mark.line] if mark.line < len(lines) else ""
        if "\t" in source_line:
            hint = "YAML does not allow tabs for indentation; indent with spaces"
        elif ": " in source_line.split(":", 1)[-1]:
            hint = "a value containing ': ' must be quoted, e.g. key: \"a: b\""
    problem = " ".join(p for p in (exc.context, exc.problem) if p) or "invalid YAML"
    if context is not None and mark is not context and context.line != mark.line:
        problem += f" (opened on line {context.line + first_line})"
    return DefinitionError.at(f"invalid YAML: {problem}", file=file, line=line, column=column, hint=hint)
