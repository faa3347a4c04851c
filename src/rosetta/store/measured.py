"""Which versions this machine measured: the ledger that lets ``rosetta versions`` vouch for scores.

An optimized artifact records its dev and test scores, and its ``content_sha256`` seals them with
the rest of the file; but anyone can write a sealed file, so a version shipped with a cloned project
(or kept from a teammate's machine) could list any score. When a search here writes an artifact or
keeps a version, it appends that version's id to ``.rosetta/measured.jsonl`` with an HMAC under the
project's key (:mod:`rosetta.signing`, kept outside the project); a version's scores are shown as
measured only when its id has a line that verifies. Lines that do not verify are ignored.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

log = logging.getLogger("rosetta")

_PURPOSE = "measured version"
_MAX_LEDGER = 16 * 1024 * 1024  # about 100,000 versions


def mark_measured(root: Path, version_id: str) -> None:
    """Record that this machine measured the scores of ``version_id`` (a content_sha256) for the
    project at ``root``. Best effort: without a usable key the version's scores are later shown as
    not measured here, which is what a warning says now."""
    from rosetta.fileio import TrustedDirectory
    from rosetta.settings import ProjectState
    from rosetta.signing import NoSecret, project_secret, sign

    try:
        line = json.dumps({"id": version_id, "hmac": sign(project_secret(root), _PURPOSE, version_id)})
        ledger = ProjectState.of(root).measured
        with TrustedDirectory.open(ledger.parent, root, create=True) as state:
            state.append(ledger.name, (line + "\n").encode("ascii"))
    except (NoSecret, OSError) as exc:
        log.warning("cannot record that this machine measured version %s (%s); `rosetta versions` will show its "
                    "scores as not measured here", version_id[:12], exc)


def measured_ids(root: Path) -> set[str]:
    """The version ids whose scores this machine measured for the project at ``root`` (empty when
    there is no ledger, no key, or no line that verifies)."""
    from rosetta.fileio import read_trusted
    from rosetta.settings import ProjectState
    from rosetta.signing import NoSecret, project_secret, verifies

    try:
        text = read_trusted(ProjectState.of(root).measured, root, limit=_MAX_LEDGER)
        secret = project_secret(root)
    except (OSError, UnicodeDecodeError, NoSecret):
        return set()
    found = set()
    for line in text.splitlines():
        try:
            entry = json.loads(line)
            version, digest = entry["id"], entry["hmac"]
        except (ValueError, TypeError, KeyError):
            continue
        if isinstance(version, str) and verifies(secret, _PURPOSE, version, digest):
            found.add(version)
    return found
