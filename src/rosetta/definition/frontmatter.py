"""Reading definition files: bytes → text (encodings, BOM, line endings) → frontmatter + body."""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from pathlib import Path

from rosetta.errors import DefinitionError

MAX_FILE_BYTES = 2_000_000
"""Definitions are hand-written text; refuse anything larger before reading it whole."""

_DELIMITER = "---"


@dataclass(frozen=True)
class SplitDocument:
    """A markdown file cut at its frontmatter fences; line numbers are 1-based file lines."""

    frontmatter: str | None
    frontmatter_line: int  # first line of the YAML text
    body: str
    body_line: int  # first line of the body


def read_text(path: Path) -> str:
    """Read a text file as UTF-8 (BOM and UTF-16 with BOM accepted) with ``\\n`` line endings."""
    from rosetta.fileio import read_source_bytes

    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise DefinitionError.at(
                f"file is {size:,} bytes; the limit for a definition is {MAX_FILE_BYTES:,}",
                file=path, hint="split it, or move large data into referenced files",
            )
        data = read_source_bytes(path, limit=MAX_FILE_BYTES)  # a FIFO or device is refused, never waited on
    except FileNotFoundError:
        raise DefinitionError.at("file not found", file=path, hint="check the path") from None
    except IsADirectoryError:
        raise DefinitionError.at("is a directory, expected a file", file=path) from None
    except PermissionError:
        raise DefinitionError.at("permission denied", file=path, hint="make the file readable") from None
    except OSError as exc:
        raise DefinitionError.at(f"cannot read file: {exc.strerror or exc}", file=path) from None
    return decode(data, path)


def decode(data: bytes, path: Path | str) -> str:
    """Decode bytes, naming the line and byte of the first invalid sequence."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        encoding = "utf-16"
    else:
        encoding = "utf-8-sig"
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise DefinitionError.at(
            f"not valid {encoding.removesuffix('-sig').upper()} (byte 0x{data[exc.start]:02x} at offset {exc.start})",
            file=path, line=line, column=column,
            hint="re-save the file as UTF-8 (e.g. `iconv -f latin1 -t utf-8`)",
        ) from None
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        raise DefinitionError.at("file contains a NUL character; is it binary?", file=path, line=line)
    return text.replace("\r\n", "\n").replace("\r", "\n")


def has_frontmatter(text: str) -> bool:
    """True when the first line is a ``---`` fence."""
    return text.split("\n", 1)[0].rstrip() == _DELIMITER


def split_frontmatter(text: str, path: Path | str) -> SplitDocument:
    """Cut ``---`` fenced YAML off the top of a markdown file.

    Raises when the file does not open with a fence or the fence is never closed; an empty
    frontmatter yields ``frontmatter=""`` and is left for the schema to reject.
    """
    lines = text.split("\n")
    if not has_frontmatter(text):
        raise DefinitionError.at(
            "no YAML frontmatter: the file must start with a '---' line",
            file=path, line=1,
            hint="add '---', the metadata (at least 'name: ...'), and a closing '---' above the body",
        )
    for index in range(1, len(lines)):
        if lines[index].rstrip() in (_DELIMITER, "..."):
            return SplitDocument(
                frontmatter="\n".join(lines[1:index]),
                frontmatter_line=2,
                body="\n".join(lines[index + 1 :]),
                body_line=index + 2,
            )
    raise DefinitionError.at(
        "frontmatter opened on line 1 is never closed",
        file=path, line=1,
        hint="add a line with just '---' after the metadata, before the body",
    )
