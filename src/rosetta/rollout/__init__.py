"""Prompt rollout: retained versions of each artifact, sticky A/B routing between two of them, an
outcome log, and promotion decided by a significance test.

Beside each artifact ``compiled/<agent>/<provider>/<model>.yaml`` live:

- ``<model>.versions/<content_sha256>.yaml``: earlier artifacts, byte for byte (their seal still
  verifies), kept by the compiler whenever it replaces one with different content;
- ``<model>.rollout.yaml``: which version is active and the experiment running, if any.

Modules, one job each: :mod:`~rosetta.rollout.versions` (ids, retained files, listing),
:mod:`~rosetta.rollout.config` (rollout.yaml), :mod:`~rosetta.rollout.routing` (who gets which
version), :mod:`~rosetta.rollout.outcomes` (the JSONL log), :mod:`~rosetta.rollout.stats` (the
tests), :mod:`~rosetta.rollout.report` (per-arm summaries) and :mod:`~rosetta.rollout.promotion`
(starting, promoting and stopping experiments). The runtime imports only the first three, and
none of them imports pydantic or litellm.
"""
