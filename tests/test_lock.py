"""Supply-chain hygiene: every locked package is pinned with hashes, and known-bad releases never
enter the lock."""

from __future__ import annotations

import re

import pytest

from conftest import REPO

BANNED = {("litellm", "1.82.7"), ("litellm", "1.82.8")}  # malicious uploads


@pytest.mark.parametrize("lock", ["main.lock", "test.lock"])
def test_lock_pins_every_package_with_hashes(lock):
    text = (REPO / "requirements" / lock).read_text()
    entries = re.split(r"\n(?=[a-z0-9])", text.split("\n", 2)[2] if text.startswith("#") else text)
    pins = [e for e in entries if re.match(r"^[a-z0-9][a-z0-9._-]*==", e)]
    assert len(pins) > 20
    for entry in pins:
        name, version = re.match(r"^([a-z0-9._-]+)==([^\s;\\]+)", entry).groups()
        assert "--hash=sha256:" in entry, f"{name} has no hash"
        assert (name, version) not in BANNED, f"{name}=={version} is a known-bad release"
