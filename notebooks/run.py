"""Run the notebooks and store them with their outputs, so a repository page shows their tables,
charts and answers without anyone running them.

    python notebooks/run.py              # execute every notebooks/*.ipynb and store it (a few minutes)
    python notebooks/run.py A.ipynb ...  # these
    python notebooks/run.py --check      # execute, store nothing; exit 1 naming each notebook whose
                                         # outputs changed

The embedded models answer the same on every machine, so a notebook's outputs are part of what it
says: CI executes each one again (tests/notebooks/test_notebooks.py) and fails when an output
differs from the stored one beyond what is volatile (timings, temporary paths, object addresses,
kernel warnings; a plot is compared by kind, not by its pixels). Run this after changing a notebook
or what it shows, and commit the result.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import nbformat

HERE = Path(__file__).resolve().parent
KERNEL = "rosetta-notebooks"
RUN_METADATA = ("execution", "ExecuteTime", "collapsed", "scrolled", "papermill")
"""Cell metadata a run or a front end writes; none of it belongs in git."""
IMAGES = ("image/png", "image/jpeg", "image/svg+xml")
VOLATILE = [
    (re.compile(r"(/private)?/(tmp|var/folders)/[^\s'\"<>)]*"), "<tmp>"),  # temporary folders and files
    (re.compile(r"0x[0-9a-f]{6,}"), "0x…"),  # object addresses
    (re.compile(r"\b\d+(\.\d+)?\s?(s|ms|seconds?)\b"), "<time>"),  # durations
    (re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:?\d\d)?"), "<when>"),  # timestamps
]
"""What may differ between two runs of the same notebook, each replaced by a placeholder."""


def clean(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The notebook without widget state or run metadata (in place); outputs stay, with the path
    the repository was cloned at written ``<repo>`` (a stored notebook names no one's machine, and
    a clone elsewhere compares equal)."""
    for cell in notebook.cells:
        for key in RUN_METADATA:
            cell.metadata.pop(key, None)
        for output in cell.get("outputs", []):
            if "text" in output:
                output.text = _unrooted(output.text)
            for mime, value in output.get("data", {}).items():
                if mime not in IMAGES and isinstance(value, (str, list)):
                    output.data[mime] = _unrooted(value)
            if "traceback" in output:
                output.traceback = [_unrooted(line) for line in output.traceback]
    for key in ("widgets", "papermill"):
        notebook.metadata.pop(key, None)
    return notebook


def _unrooted(text: Any) -> Any:
    root = str(HERE.parent)
    return [part.replace(root, "<repo>") for part in text] if isinstance(text, list) else text.replace(root, "<repo>")


def execute(notebook: nbformat.NotebookNode, kernels: Path, *, timeout: int = 1500) -> nbformat.NotebookNode:
    """Run every cell of ``notebook`` (in place, from notebooks/) on this interpreter's kernel, whose
    spec :func:`write_kernel` put under ``kernels``; raises on the first failing cell."""
    import os

    from nbclient import NotebookClient

    os.environ["JUPYTER_PATH"] = str(kernels)
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    NotebookClient(notebook, kernel_name=KERNEL, timeout=timeout, startup_timeout=120, record_timing=False,
                   resources={"metadata": {"path": str(HERE)}}).execute()
    return clean(notebook)


def write_kernel(root: Path) -> Path:
    """A kernelspec for this interpreter under ``root`` (a Jupyter path), so the notebooks run on
    this environment whatever kernels the machine has installed."""
    from ipykernel.kernelspec import write_kernel_spec

    write_kernel_spec(root / "kernels" / KERNEL,
                      overrides={"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                                 "display_name": "rosetta notebooks"})
    return root


def comparable(notebook: nbformat.NotebookNode) -> list[list[Any]]:
    """Each code cell's outputs with what is volatile replaced: texts normalized, images by kind,
    standard error only where rosetta logged (kernel and library warnings left out). Each stream is
    compared whole: the kernel flushes standard output and standard error on its own schedule, so how
    their chunks interleave differs from run to run."""
    cells = []
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        outputs: list[Any] = []
        streams: dict[str, str] = {}
        for output in cell.outputs:
            if output.output_type == "stream":
                streams[output.name] = streams.get(output.name, "") + output.text
            elif output.output_type in ("display_data", "execute_result"):
                outputs.append({mime: f"<{mime}>" if mime in IMAGES else normal(_text(value))
                                for mime, value in sorted(output.data.items())})
            elif output.output_type == "error":
                outputs.append(("error", output.ename, normal(output.evalue)))
        for name, text in sorted(streams.items()):
            own = [line for line in text.splitlines() if name == "stdout" or " rosetta" in line]
            if own:  # rosetta's own log lines count; other libraries' warnings on standard error do not
                outputs.append((name, normal("\n".join(own))))
        cells.append(outputs)
    return cells


def normal(text: str) -> str:
    text = text.replace(str(HERE.parent), "<repo>")  # where the repository was cloned
    for pattern, placeholder in VOLATILE:
        text = pattern.sub(placeholder, text)
    return text


def _text(value: Any) -> str:
    return value if isinstance(value, str) else "".join(value) if isinstance(value, list) else str(value)


def differences(stored: nbformat.NotebookNode, fresh: nbformat.NotebookNode) -> list[str]:
    """Where the fresh run's outputs differ from the stored ones (code cells numbered from 1)."""
    import difflib

    found = []
    old, new = comparable(stored), comparable(fresh)
    if len(old) != len(new):
        return [f"{len(old)} code cells stored, {len(new)} run"]
    for number, (was, now) in enumerate(zip(old, new, strict=True), 1):
        if was != now:
            lines = difflib.unified_diff(repr(was).split("\\n"), repr(now).split("\\n"), "stored", "run", lineterm="", n=1)
            found.append(f"code cell {number}:\n" + "\n".join(list(lines)[:40]))
    return found


MISSING = ("notebooks/run.py needs nbformat, nbclient and ipykernel, which are not installed: pip install "
           "'rosetta-prompts[notebook]' (or ./dev test, whose environment has them)")
"""What the script says, on standard error with exit code 2, where they cannot be imported."""


def main(argv: list[str]) -> int:
    try:
        import nbclient  # noqa: F401
        import nbformat
    except ImportError:
        print(MISSING, file=sys.stderr)
        return 2
    check = "--check" in argv
    paths = [Path(a) for a in argv if a != "--check"] or sorted(HERE.glob("*.ipynb"))
    changed = []
    with tempfile.TemporaryDirectory() as kernels:
        write_kernel(Path(kernels))
        for path in paths:
            stored = nbformat.read(path, as_version=4)
            fresh = execute(nbformat.read(path, as_version=4), Path(kernels))
            if differences(stored, fresh):
                changed.append(path)
            if not check:
                path.write_text(nbformat.writes(fresh) + "\n", encoding="utf-8")
            print(f"{path}: {'outputs changed' if path in changed else 'outputs as stored'}")
    return 1 if check and changed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
