"""Strip notebooks for git: no outputs, no execution counts, no widget state or run metadata.

    python notebooks/strip.py              # strip every notebooks/*.ipynb in place
    python notebooks/strip.py A.ipynb ...  # strip these
    python notebooks/strip.py --check      # change nothing; exit 1 naming what is not stripped

CI executes the notebooks from scratch (tests/notebooks/test_notebooks.py) and checks that the
stored copies are stripped; run this before committing a notebook you ran.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import nbformat

HERE = Path(__file__).resolve().parent
RUN_METADATA = ("execution", "ExecuteTime", "collapsed", "scrolled", "papermill")
"""Cell metadata a run or a front end writes; none of it belongs in git."""


def strip(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The notebook without outputs, execution counts, widget state and run metadata (in place)."""
    for cell in notebook.cells:
        for key in RUN_METADATA:
            cell.metadata.pop(key, None)
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    for key in ("widgets", "papermill"):
        notebook.metadata.pop(key, None)
    return notebook


MISSING = ("notebooks/strip.py needs nbformat, which is not installed: pip install 'rosetta-prompts[notebook]' "
           "(or ./dev test, whose environment has it)")
"""What the script says, on standard error with exit code 2, where nbformat cannot be imported."""


def main(argv: list[str]) -> int:
    try:
        import nbformat
    except ImportError:
        print(MISSING, file=sys.stderr)
        return 2
    check = "--check" in argv
    paths = [Path(a) for a in argv if a != "--check"] or sorted(HERE.glob("*.ipynb"))
    dirty = []
    for path in paths:
        original = path.read_text(encoding="utf-8")
        stripped = nbformat.writes(strip(nbformat.reads(original, as_version=nbformat.NO_CONVERT))) + "\n"
        if stripped != original:
            dirty.append(path)
            if not check:
                path.write_text(stripped, encoding="utf-8")
    for path in dirty:
        print(f"{path}: {'not stripped' if check else 'stripped'}")
    return 1 if check and dirty else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
