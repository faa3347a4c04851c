"""The project settings an embedded-model call reads — which GGUF a name means (``local_models``),
where the pinned weights are assembled (``cache_dir``) and how many threads a context gets
(``local_threads``) — taken from the call, never from wherever the process happens to stand.

The runtime passes the agent's project settings with each ``local/`` call in litellm's
``metadata`` (which litellm hands to a custom provider untouched); a direct ``litellm.completion``
call without them reads the working directory's project, as any litellm provider reads its
environment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rosetta.settings import Settings

KEY = "rosetta_local"
"""The entry of litellm's ``metadata`` that carries them."""


@dataclass(frozen=True)
class LocalSettings:
    """What of a project's :class:`~rosetta.settings.Settings` the embedded models read."""

    cache_dir: Path
    local_models: Mapping[str, Path] = field(default_factory=dict)
    local_threads: int | None = None

    @classmethod
    def of(cls, settings: Settings) -> LocalSettings:
        return cls(settings.cache_dir, dict(settings.local_models), settings.local_threads)

    @classmethod
    def here(cls) -> LocalSettings:
        """The working directory's project: what a call that carries none reads."""
        from rosetta.settings import load_settings

        return cls.of(load_settings())

    @classmethod
    def of_call(cls, kwargs: Mapping[str, Any]) -> LocalSettings:
        """Those a litellm custom-provider call carries (:meth:`metadata`), else :meth:`here`."""
        metadata = (kwargs.get("litellm_params") or {}).get("metadata") or {}
        carried = metadata.get(KEY) if isinstance(metadata, Mapping) else None
        if not isinstance(carried, Mapping):
            return cls.here()
        try:
            threads = carried.get("local_threads")
            return cls(Path(carried["cache_dir"]), {str(name): Path(path) for name, path in
                                                    (carried.get("local_models") or {}).items()},
                       int(threads) if threads is not None else None)
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            from rosetta.errors import Problem, UsageError

            raise UsageError(Problem(f"metadata.{KEY} is not what rosetta's runtime writes ({error!r})",
                                     field=f"metadata.{KEY}", expected="cache_dir, local_models, local_threads",
                                     hint="leave it out: the runtime sets it for local/ models")) from None

    def metadata(self, given: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """litellm's ``metadata`` for a call: the caller's own (``given``) with these added."""
        return {**(given or {}), KEY: {"cache_dir": str(self.cache_dir), "local_threads": self.local_threads,
                                       "local_models": {name: str(path) for name, path in self.local_models.items()}}}
