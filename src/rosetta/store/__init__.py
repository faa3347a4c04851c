"""Everything under ``compiled/``, and nothing else opens a file there.

Beside each artifact ``compiled/<agent>/<provider>/<model>.yaml`` live its retained versions
(``<model>.versions/<content_sha256>.yaml``) and its rollout pins (``<model>.rollout.yaml``); the
tree holds a build index and a lock. Modules, one job each: :mod:`~rosetta.store.artifact` (the
format and its seal), :mod:`~rosetta.store.index` (the build index), :mod:`~rosetta.store.versions`
(retained versions), :mod:`~rosetta.store.pins` (the rollout file), :mod:`~rosetta.store.routing`
(who gets which pinned version), :mod:`~rosetta.store.publish` (atomic, locked writes) and
:mod:`~rosetta.store.lookup` (what the runtime reads: an agent's artifacts, verified). None of them
imports pydantic or litellm.
"""
