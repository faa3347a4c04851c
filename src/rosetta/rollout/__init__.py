"""Prompt rollout: an outcome log, significance tests, per-arm reports, and starting, promoting and
stopping experiments between two retained versions of an artifact.

The files it acts on live in the store (:mod:`rosetta.store`: retained versions, the rollout pins
and sticky routing); modules here, one job each: :mod:`~rosetta.rollout.outcomes` (the JSONL log),
:mod:`~rosetta.rollout.stats` (the tests), :mod:`~rosetta.rollout.report` (per-arm summaries) and
:mod:`~rosetta.rollout.promotion` (experiments, written through :mod:`rosetta.store.publish`).
"""
