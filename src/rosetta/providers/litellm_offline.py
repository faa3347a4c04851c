"""The one way rosetta imports litellm: with its bundled model map, never fetched from the network.

litellm downloads its model cost map at import time unless ``LITELLM_LOCAL_MODEL_COST_MAP`` is
set; rosetta runs offline by default, so every import goes through :func:`import_litellm`.
"""

from __future__ import annotations

import os
from types import ModuleType


def import_litellm() -> ModuleType:
    """litellm, imported with the offline model map (the user's explicit setting wins)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    return litellm
