"""Artifacts are what they claim: a property test tampers compiled artifacts in well over a hundred
ways and checks that the strict runtime serves none of them and ``compile --check`` flags every one.

Resealed edits of the prompt (a changed instruction with a recomputed ``content_sha256``) pass
every check but one: rendering the artifact again from its sources, which ``--check`` and the
strict runtime do.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from rosetta.compile.compiler import CompileOptions, Status, compile_paths
from rosetta.errors import RosettaError
from rosetta.providers.adapter import load_adapters
from rosetta.runtime.agent import load
from rosetta.store.artifact import HEADER

MODELS = ("anthropic/claude-sonnet-5-5", "openai/gpt-4o")


def options(tree: Path, *, check: bool = False, adapter_dirs: tuple[Path, ...] = ()) -> CompileOptions:
    return CompileOptions(
        out=tree / "compiled", root=tree, adapters=load_adapters(adapter_dirs), models=MODELS, check=check
    )


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from conftest import make_project

    tree = make_project(tmp_path_factory.mktemp("tamper") / "project")
    assert compile_paths([tree / "signatures"], options(tree), jobs=1).exit_code() == 0
    return tree


def reseal(body: str) -> str:
    return f"{HEADER}content_sha256: {hashlib.sha256(body.encode()).hexdigest()}\n{body}"


def body_of(text: str) -> str:
    return text.split("\n", 3)[3]


Tamper = Callable[[Path, Path], None]  # (project, artifact path) → edits files in place


def text_edit(edit: Callable[[str], str]) -> Tamper:
    def apply(tree: Path, path: Path) -> None:
        path.write_bytes(edit(path.read_text(encoding="utf-8")).encode("utf-8"))

    return apply


def resealed(edit: Callable[[str], str]) -> Tamper:
    return text_edit(lambda text: reseal(edit(body_of(text))))


def flip(offset: int) -> Callable[[str], str]:
    def edit(text: str) -> str:
        position = len(HEADER) + 80 + offset % (len(text) - len(HEADER) - 80)
        replacement = "X" if text[position] != "X" else "Y"
        return text[:position] + replacement + text[position + 1 :]

    return edit


def tampers() -> Iterator[tuple[str, Tamper]]:
    """(name, tamper) — well over a hundred of them."""
    rng = random.Random(36)
    for n in range(40):
        yield f"byte flip {n}", text_edit(flip(rng.randrange(10**6)))
    for n in range(10):
        position = len(HEADER) + len("content_sha256: ") + rng.randrange(64)
        yield (
            f"seal digit {n}",
            text_edit(lambda t, p=position: t[:p] + ("0" if t[p] != "0" else "1") + t[p + 1 :]),
        )
    for n in range(12):
        cut = rng.random()
        yield f"truncated at {cut:.2f}", text_edit(lambda t, c=cut: t[: int(len(t) * c)])
    yield "empty file", text_edit(lambda t: "")
    yield "seal removed", text_edit(lambda t: t.replace("content_sha256: ", "content_sha: ", 1))
    yield "not UTF-8", lambda tree, path: path.write_bytes(b"\xff\xfe\x00garbage" * 10)
    yield "line above the seal", text_edit(lambda t: "prompt: {}\n" + t)
    yield "key between header and seal", text_edit(lambda t: t.replace(HEADER, HEADER + "prompt: {}\n", 1))
    for key in ("format", "agent", "model", "adapter", "provenance", "prompt"):
        yield f"duplicate {key} key, resealed", resealed(lambda b, k=key: b + f"{k}: duplicate\n")
    yield "format 2, resealed", resealed(lambda b: b.replace("format: 1\n", "format: 2\n", 1))
    yield (
        "compiler version, resealed",
        resealed(lambda b: b.replace("compiler_version: ", "compiler_version: 9", 1)),
    )
    yield "inputs hash, resealed", resealed(lambda b: _swap_hex(b, "inputs_sha256: "))
    yield "source hash, resealed", resealed(lambda b: _swap_hex(b, "source_sha256: "))
    yield "adapter hash, resealed", resealed(lambda b: _swap_hex(b, "adapter_sha256: "))
    yield "model hash, resealed", resealed(lambda b: _swap_hex(b, "model_sha256: "))
    yield (
        "source file list, resealed",
        resealed(lambda b: b.replace("- signatures/", "- signatures/../signatures/", 1)),
    )
    yield (
        "agent renamed, resealed",
        resealed(lambda b: b.replace("name: vuln-triage", "name: advisory-extractor", 1)),
    )
    yield (
        "model renamed, resealed",
        resealed(lambda b: b.replace("model: openai/gpt-4o", "model: openai/gpt-4o-mini", 1)),
    )
    yield (
        "another agent's artifact",
        lambda tree, path: shutil.copy(tree / "compiled/advisory-extractor/openai/gpt-4o.yaml", path),
    )
    yield (
        "another model's artifact",
        lambda tree, path: shutil.copy(tree / "compiled/vuln-triage/anthropic/claude-sonnet-5-5.yaml", path),
    )
    yield (
        "symlink to another agent's",
        lambda tree, path: _symlink(path, tree / "compiled/advisory-extractor/openai/gpt-4o.yaml"),
    )
    yield "symlink to a copy of itself", lambda tree, path: _symlink(path, _copy_aside(path))
    yield "agent folder is a symlink", _symlinked_folder
    yield "FIFO", lambda tree, path: (path.unlink(), os.mkfifo(path))
    yield "directory", lambda tree, path: (path.unlink(), path.mkdir())
    yield (
        "definition edited",
        lambda tree, path: _append(tree / "signatures/vuln-triage.md", "\nOne more rule.\n"),
    )
    yield (
        "definition's frontmatter edited",
        lambda tree, path: _replace_in(tree / "signatures/vuln-triage.md", "version: ", "version: 9"),
    )
    yield "adapter overridden", _adapter_overridden
    for n in range(12):  # resealed edits of the prompt itself: only a fresh render tells
        yield f"prompt edit {n}, resealed", resealed(lambda b, n=n: _edit_prompt(b, random.Random(n)))
    yield "temperature, resealed", resealed(lambda b: b.replace("temperature: 0", "temperature: 1", 1))
    yield "warnings, resealed", resealed(lambda b: b.replace("warnings: []", "warnings: [fine]", 1))


def _swap_hex(body: str, label: str) -> str:
    start = body.index(label) + len(label)
    return body[:start] + ("0" if body[start] != "0" else "1") + body[start + 1 :]


def _edit_prompt(body: str, rng: random.Random) -> str:
    start = body.index("\nprompt:") + 10
    lines = body[start:].split("\n")
    candidates = [i for i, line in enumerate(lines) if len(line.strip()) > 20 and ":" not in line[:4]]
    index = rng.choice(candidates)
    lines[index] = lines[index].replace(lines[index].strip()[:6], "IGNORE", 1)
    return body[:start] + "\n".join(lines)


def _symlink(path: Path, target: Path) -> None:
    path.unlink()
    path.symlink_to(target)


def _copy_aside(path: Path) -> Path:
    aside = path.parent.parent.parent.parent / "aside.yaml"
    shutil.copy(path, aside)
    return aside


def _symlinked_folder(tree: Path, path: Path) -> None:
    folder = tree / "compiled/vuln-triage"
    moved = tree / "elsewhere"
    shutil.move(folder, moved)
    folder.symlink_to(moved)


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + text, encoding="utf-8")


def _replace_in(path: Path, old: str, new: str) -> None:
    path.write_text(path.read_text(encoding="utf-8").replace(old, new, 1), encoding="utf-8")


def _adapter_overridden(tree: Path, path: Path) -> None:
    adapters = tree / "adapters"
    adapters.mkdir(exist_ok=True)
    source = Path(load_adapters()["openai"].path).read_text(encoding="utf-8")
    (adapters / "openai.yaml").write_text(source + "\n# tuned\n", encoding="utf-8")
    _append(tree / "pyproject.toml", "adapter_dirs = ['adapters']\n")


@contextmanager
def no_hang(seconds: int = 10) -> Iterator[None]:
    """Fail instead of blocking forever (a FIFO opened for reading waits for a writer)."""

    def fail(*_: object) -> None:
        raise TimeoutError("blocked reading the artifact")

    previous = signal.signal(signal.SIGALRM, fail)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


CASES = list(tampers())


def test_there_are_over_a_hundred_distinct_tampers():
    assert len(CASES) >= 100 and len({name for name, _ in CASES}) == len(CASES)


@pytest.mark.parametrize(("name", "tamper"), CASES, ids=[name for name, _ in CASES])
def test_tampered_artifact_is_never_served_and_always_flagged(project, tmp_path, name, tamper):
    tree = tmp_path / "project"
    shutil.copytree(project, tree, symlinks=True)
    path = tree / "compiled/vuln-triage/openai/gpt-4o.yaml"
    tamper(tree, path)
    adapter_dirs = (tree / "adapters",) if (tree / "adapters").is_dir() else ()
    with no_hang():
        report = compile_paths(
            [tree / "signatures/vuln-triage.md"], options(tree, check=True, adapter_dirs=adapter_dirs), jobs=1
        )
        flagged = {r.model: r for r in report.results}
        assert flagged["openai/gpt-4o"].status is not Status.UP_TO_DATE, f"--check passed {name}"
        assert report.exit_code() == 1
        agent = load("vuln-triage", project=tree, strict=True)
        with pytest.raises(RosettaError) as refused:
            agent.prompt_for("openai/gpt-4o")
        assert "vuln-triage on openai/gpt-4o" in str(refused.value)


def test_untouched_artifacts_pass_both(project, tmp_path):
    tree = tmp_path / "project"
    shutil.copytree(project, tree, symlinks=True)
    report = compile_paths([tree / "signatures"], options(tree, check=True), jobs=1)
    assert report.exit_code() == 0 and {r.status for r in report.results} == {Status.UP_TO_DATE}
    agent = load("vuln-triage", project=tree, strict=True)
    assert agent.explain("openai/gpt-4o").kind == "artifact"


def test_check_names_the_first_differing_field(project, tmp_path):
    tree = tmp_path / "project"
    shutil.copytree(project, tree, symlinks=True)
    path = tree / "compiled/vuln-triage/openai/gpt-4o.yaml"
    resealed(lambda b: b.replace("temperature: 0", "temperature: 1", 1))(tree, path)
    report = compile_paths([tree / "signatures/vuln-triage.md"], options(tree, check=True), jobs=1)
    result = next(r for r in report.results if r.model == "openai/gpt-4o")
    assert result.status is Status.INVALID and "`prompt.generation.temperature`" in result.message


def test_a_copied_artifact_is_refused_with_whose_it_is(project, tmp_path):
    """Issue 36, case 1: another agent's artifact copied in is refused, even found by its model line."""
    tree = tmp_path / "project"
    shutil.copytree(project, tree, symlinks=True)
    shutil.copy(
        tree / "compiled/advisory-extractor/openai/gpt-4o.yaml", tree / "compiled/vuln-triage/openai/gpt-4o.yaml"
    )
    agent = load("vuln-triage", project=tree)
    selection = agent.explain("openai/gpt-4o")
    assert selection.kind != "artifact" and "artifact of advisory-extractor on openai/gpt-4o" in selection.reason
    assert agent.prompt_for("openai/gpt-4o").agent == "vuln-triage"
