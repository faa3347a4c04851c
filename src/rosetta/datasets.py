"""Labeled examples: ``datasets/<agent>/{train,dev,test}.jsonl`` (or ``.csv``), or a hub dataset.

Files are read with HF ``datasets``: JSONL through its ``text`` builder, one row per line, so every
row keeps its exact content and line number (the ``json`` builder unifies rows into one Arrow
schema, which adds ``null`` keys and turns ``7`` into ``7.0``); CSV through its ``csv`` builder.
Every row is checked against the agent's signature — declared inputs present, output valid against
the output schema, ids unique — and a bad row is reported with its file and line; nothing is
silently dropped.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rosetta.errors import Location, Problem, RosettaError
from rosetta.third_party import quiet_datasets

SPLITS = ("train", "dev", "test")
_ALIASES = {"dev": ("dev", "validation", "val"), "train": ("train",), "test": ("test",)}
_MAX_LISTED = 20
MAX_SPLIT_BYTES = 256 * 1024 * 1024
"""Largest split file read (by its size, holes included): labeled examples for prompts are
thousands of rows, megabytes; a file past this is refused before any reader sees it."""


class DatasetError(RosettaError):
    """Labeled examples are missing, unreadable or do not fit the agent's signature."""


class NoDataset(DatasetError):
    """The agent has no labeled examples to learn from (no dataset folder, or one without train and
    dev splits, such as a test split kept for ``rosetta verify``): a tree of agents skips it."""


@dataclass(frozen=True)
class Example:
    """One labeled row: the agent's inputs and the answer it should give."""

    id: str
    inputs: dict[str, Any]
    output: Any
    file: str = ""
    line: int = 0
    tool_calls: tuple[ExpectedCall, ...] = ()
    """The tool calls answering this row needs, with their results (``rosetta verify``, PV-019)."""


@dataclass(frozen=True)
class ExpectedCall:
    """A call of one of the agent's tools that a row needs: the tool, the arguments the call must
    include (a subset: others may vary), and the result the tool gives it. A row holds them as
    ``"tool_calls": [{"name": ..., "arguments": {...}, "result": ...}]``, the shape of
    ``Result.tool_calls``."""

    name: str
    arguments: dict[str, Any]
    result: Any

    def matches(self, name: str, arguments: Any) -> bool:
        """Whether a call of ``name`` with ``arguments`` is this one (it includes every argument
        given here, with the same value)."""
        return name == self.name and isinstance(arguments, dict) and all(
            key in arguments and arguments[key] == value for key, value in self.arguments.items())


@dataclass(frozen=True)
class LabeledData:
    """The three splits of one agent's examples, and a hash over all of them."""

    train: tuple[Example, ...]
    dev: tuple[Example, ...]
    test: tuple[Example, ...]
    source: str
    sha256: str

    def split(self, name: str) -> tuple[Example, ...]:
        if name not in SPLITS:
            raise DatasetError(Problem(f"unknown split {name!r}", field="split", expected=" | ".join(SPLITS)))
        return getattr(self, name)

    def summary(self) -> str:
        return f"{len(self.train)} train / {len(self.dev)} dev / {len(self.test)} test from {self.source}"


def default_location(datasets_dir: Path, agent: str, configured: str | None, root: Path) -> str:
    """Where an agent's examples are: its ``evaluation.dataset`` if set, else ``datasets/<agent>/``."""
    if configured:
        if configured.startswith("hub:"):
            return configured
        found, project = (root / configured).resolve(), root.resolve()
        if not found.is_relative_to(project):  # a definition names data only inside its project
            raise DatasetError(Problem(f"evaluation.dataset {configured!r} resolves to {found}, outside the project "
                                       f"{project}", Location(str(found)), field="evaluation.dataset",
                                       hint="move the examples inside the project, or pass --dataset to choose "
                                            "another folder yourself"))
        return str(found)
    return str(datasets_dir / agent)


def load_labeled(signature: Any, location: str | Path, *, cache_dir: Path | None = None,
                 required: tuple[str, ...] = SPLITS) -> LabeledData:
    """Load and check every split at ``location`` (a folder, or ``hub:owner/name``).

    ``required`` names the splits that must exist and be non-empty; raises :class:`DatasetError`
    listing every bad row.
    """
    location = str(location)
    if location.startswith("hub:"):
        rows = _hub_rows(location[4:], cache_dir)
    else:
        rows = _folder_rows(Path(location), cache_dir)
    problems: list[Problem] = []
    splits: dict[str, tuple[Example, ...]] = {}
    seen: dict[str, Location] = {}
    for name in SPLITS:
        examples = []
        for file, line, row in rows.get(name, []):
            example = _example(signature, name, file, line, row, problems)
            if example is None:
                continue
            where = Location(file, line)
            if example.id in seen:
                problems.append(Problem(f"duplicate id {example.id!r} (first used at {seen[example.id]})", where,
                                        field="id", hint="give every row a unique id"))
                continue
            seen[example.id] = where
            examples.append(example)
        splits[name] = tuple(examples)
    missing = [name for name in required if not rows.get(name)]
    learning = [name for name in ("train", "dev") if name in required]
    if learning and set(learning) <= set(missing) and not problems:  # e.g. a test split kept for verify alone
        raise NoDataset(Problem(f"no {' / '.join(learning)} examples in {location}: nothing to optimize on",
                                Location(location), hint=f"write {', '.join(m + '.jsonl' for m in missing)} there"))
    if missing:
        problems.append(Problem(
            f"no {' / '.join(missing)} examples found", Location(location),
            hint=f"write {', '.join(m + '.jsonl' for m in missing)} under {location} "
                 '(one JSON object per line: {"id": ..., "inputs": {...}, "output": ...})'))
    if problems:
        shown = problems[:_MAX_LISTED]
        if len(problems) > _MAX_LISTED:
            shown.append(Problem(f"... and {len(problems) - _MAX_LISTED} more problems", Location(location)))
        raise DatasetError(shown)
    digest = hashlib.sha256()
    for name in SPLITS:
        for example in splits[name]:
            row = [name, example.id, example.inputs, example.output]
            if example.tool_calls:  # rows without them hash as they always did
                row.append([[c.name, c.arguments, c.result] for c in example.tool_calls])
            digest.update(json.dumps(row, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode())
            digest.update(b"\n")
    return LabeledData(splits["train"], splits["dev"], splits["test"], location, digest.hexdigest())


# -- reading ---------------------------------------------------------------------------------


def _folder_rows(folder: Path, cache_dir: Path | None) -> dict[str, list[tuple[str, int, Any]]]:
    if not folder.is_dir():
        raise NoDataset(Problem(f"no dataset folder {folder}", Location(str(folder)),
                                   hint="create it with train.jsonl, dev.jsonl and test.jsonl, or point "
                                        "evaluation.dataset / --dataset at another folder"))
    rows: dict[str, list[tuple[str, int, Any]]] = {}
    for split in SPLITS:
        for alias in _ALIASES[split]:
            jsonl, csv = folder / f"{alias}.jsonl", folder / f"{alias}.csv"
            if os.path.lexists(jsonl):
                rows[split] = _jsonl_rows(_readable(jsonl), cache_dir)
                break
            if os.path.lexists(csv):
                rows[split] = _csv_rows(_readable(csv), cache_dir)
                break
    return rows


def _readable(path: Path) -> Path:
    """``path`` when what it leads to is a plain file of at most :data:`MAX_SPLIT_BYTES` (a link is
    followed: git-annex and DVC keep data behind links); a FIFO, device, dangling link or oversized
    file is a located :class:`DatasetError`, never handed to a reader that would wait, read without
    end or fill memory."""
    import stat

    try:
        found = path.stat()
    except OSError as exc:
        raise DatasetError(Problem(f"cannot read {path.name}: {exc.strerror or exc}", Location(str(path)),
                                   hint="a split is a plain .jsonl or .csv file; replace the link or remove it")) from None
    if not stat.S_ISREG(found.st_mode):
        kind = "a FIFO" if stat.S_ISFIFO(found.st_mode) else "a device" if stat.S_ISCHR(found.st_mode) or \
            stat.S_ISBLK(found.st_mode) else "a directory" if stat.S_ISDIR(found.st_mode) else "not a plain file"
        raise DatasetError(Problem(f"{path.name} is {kind}, not a plain file of examples", Location(str(path)),
                                   hint="a split is a plain .jsonl or .csv file"))
    if found.st_size > MAX_SPLIT_BYTES:
        raise DatasetError(Problem(f"{path.name} is {found.st_size:,} bytes; the limit for a split is "
                                   f"{MAX_SPLIT_BYTES:,}", Location(str(path)),
                                   hint="labeled examples for a prompt are thousands of rows: sample them"))
    return path


def _jsonl_rows(path: Path, cache_dir: Path | None) -> list[tuple[str, int, Any]]:
    with quiet_datasets() as hf:
        lines = hf.load_dataset("text", data_files={"rows": str(path)}, split="rows", cache_dir=_hf_cache(cache_dir))
    rows = []
    for number, record in enumerate(lines, start=1):
        text = record["text"]
        if not text.strip():
            continue
        try:
            row = json.loads(text)
        except json.JSONDecodeError as exc:
            rows.append((str(path), number, _Unreadable(f"invalid JSON: {exc.msg} (column {exc.colno})")))
            continue
        try:
            json.dumps(row, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:  # JSON's \ud800 escape: no character, it cannot be sent or shown
            row = _Unreadable("holds a lone surrogate escape (such as \\ud800), which is no character")
        rows.append((str(path), number, row))
    return rows


def _csv_rows(path: Path, cache_dir: Path | None) -> list[tuple[str, int, Any]]:
    import csv

    try:
        with path.open(encoding="utf-8", newline="") as stream:
            header = next(csv.reader(stream), [])
        with quiet_datasets() as hf:
            # every column as text: the output column holds JSON, and "NA" or "1.0" must stay as written
            features = hf.Features({name: hf.Value("string") for name in header})
            table = hf.load_dataset("csv", data_files={"rows": str(path)}, split="rows",
                                    cache_dir=_hf_cache(cache_dir), features=features, keep_default_na=False)
    except Exception as exc:  # pandas/pyarrow raise many classes for a malformed file
        raise DatasetError(Problem(f"cannot read CSV: {exc}", Location(str(path)))) from None
    rows = []
    for number, record in enumerate(table, start=2):  # line 1 is the header (a quoted multi-line cell shifts this)
        row: dict[str, Any] = {"inputs": {}, "id": record.pop("id", None) or None}
        if "output" not in record:
            rows.append((str(path), number, _Unreadable("CSV files need an 'output' column (JSON text for "
                                                        "structured agents)")))
            continue
        output = record.pop("output")
        try:
            row["output"] = json.loads(output) if output.strip()[:1] in ("{", "[") else output
        except json.JSONDecodeError as exc:
            rows.append((str(path), number, _Unreadable(f"output column is not valid JSON: {exc.msg}")))
            continue
        row["inputs"] = {key: value for key, value in record.items() if value != ""}
        rows.append((str(path), number, row))
    return rows


def _hub_rows(name: str, cache_dir: Path | None) -> dict[str, list[tuple[str, int, Any]]]:
    try:
        with quiet_datasets() as hf:
            loaded = hf.load_dataset(name, cache_dir=_hf_cache(cache_dir))
    except Exception as exc:  # offline, unknown name, private: the hub client raises many classes
        raise DatasetError(Problem(f"cannot load hub dataset {name!r}: {exc}", Location(f"hub:{name}"),
                                   hint="check the name and the network, or copy the data under datasets/")) from None
    rows: dict[str, list[tuple[str, int, Any]]] = {}
    for split in SPLITS:
        found = next((alias for alias in _ALIASES[split] if alias in loaded), None)
        if found is not None:
            rows[split] = [(f"hub:{name}[{found}]", number, dict(record))
                           for number, record in enumerate(loaded[found], start=1)]
    return rows


def _hf_cache(cache_dir: Path | None) -> str | None:
    return str(cache_dir / "hf-datasets") if cache_dir is not None else None


class _Unreadable:
    def __init__(self, message: str) -> None:
        self.message = message


# -- checking --------------------------------------------------------------------------------


def _example(signature: Any, split: str, file: str, line: int, row: Any, problems: list[Problem]) -> Example | None:
    where = Location(file, line)
    if isinstance(row, _Unreadable):
        problems.append(Problem(row.message, where))
        return None
    if not isinstance(row, dict) or not isinstance(row.get("inputs"), dict) or "output" not in row:
        problems.append(Problem("each row must be an object with 'inputs' (an object) and 'output'", where,
                                hint='e.g. {"id": "ex1", "inputs": {"report": "..."}, "output": {...}}'))
        return None
    declared = {field.name: field for field in signature.inputs}
    inputs = {key: value for key, value in row["inputs"].items() if value is not None}
    unknown = sorted(set(inputs) - set(declared))
    if unknown:
        problems.append(Problem(f"undeclared inputs {unknown}", where, field="inputs",
                                expected=f"only {sorted(declared)}"))
        return None
    absent = [name for name, field in declared.items() if field.required and name not in inputs]
    if absent:
        problems.append(Problem(f"missing required inputs {absent}", where, field="inputs"))
        return None
    output = row["output"]
    if signature.output_schema is not None:
        error = _schema_error(signature.output_schema, output)
        if error is not None:
            problems.append(Problem(f"output does not fit the agent's output schema: {error}", where, field="output",
                                    hint="fix the expected answer (or the schema, if the data is right)"))
            return None
    elif not isinstance(output, str):
        problems.append(Problem("output must be text for an agent without an output schema", where, field="output"))
        return None
    calls = _expected_calls(signature, row.get("tool_calls"), where, problems)
    if calls is None:
        return None
    identifier = row.get("id")
    return Example(str(identifier) if identifier not in (None, "") else f"{split}-{line}", inputs, output, file, line,
                   calls)


_CALL_SHAPE = '[{"name": "<a declared tool>", "arguments": {...}, "result": <what the tool returns>}]'


def _expected_calls(signature: Any, value: Any, where: Location,
                    problems: list[Problem]) -> tuple[ExpectedCall, ...] | None:
    """A row's ``tool_calls``: a list of calls of declared tools, each with the result it gets."""
    if value is None:
        return ()
    declared = sorted(tool.name for tool in signature.tools)
    if not isinstance(value, list) or not all(isinstance(c, dict) for c in value):
        problems.append(Problem("tool_calls must be a list of objects", where, field="tool_calls",
                                expected=_CALL_SHAPE))
        return None
    calls = []
    for number, call in enumerate(value):
        field = f"tool_calls[{number}]"
        if call.get("name") not in declared:
            problems.append(Problem(f"{call.get('name')!r} is not a tool the agent declares", where, field=field,
                                    expected=" | ".join(declared) or "no tool: the agent declares none",
                                    hint="name one of the definition's tools, or declare it under tools:"))
            return None
        unknown = sorted(set(call) - {"name", "arguments", "result"})
        if unknown or "result" not in call or not isinstance(call.get("arguments", {}), dict):
            what = f"unknown keys {unknown}" if unknown else "no result" if "result" not in call \
                else "arguments must be an object"
            problems.append(Problem(f"{what} in the expected call of {call['name']}", where, field=field,
                                    expected=_CALL_SHAPE))
            return None
        calls.append(ExpectedCall(call["name"], dict(call.get("arguments") or {}), call["result"]))
    return tuple(calls)


def _schema_error(schema: dict[str, Any], value: Any) -> str | None:
    from rosetta.definition.patterns import schema_validator

    validator = schema_validator(json.dumps(schema, sort_keys=True))  # patterns searched under a time limit
    error = next(iter(sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))), None)
    if error is None:
        return None
    path = "/".join(str(p) for p in error.absolute_path)
    return f"{path + ': ' if path else ''}{error.message}"
