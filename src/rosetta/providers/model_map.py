"""litellm, imported so that it never reaches the network on its own, for reading its bundled model
map (the catalog's fallback for models it does not list).

litellm downloads its model cost map at import (unless ``LITELLM_LOCAL_MODEL_COST_MAP``), the
Anthropic beta-header table on the first Anthropic call (unless
``LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS``), and a Hugging Face tokenizer when counting tokens for
llama-style names (unless ``disable_hf_tokenizer_download``). rosetta runs offline by default; a
user's explicit environment settings win. Calls go through
:func:`rosetta.local.litellm_offline.import_litellm`, which adds the embedded ``local/`` provider.
"""

from __future__ import annotations

import os
from types import ModuleType

OFFLINE_ENVIRONMENT = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS": "True",
}


def offline_litellm() -> ModuleType:
    """litellm (≈3 s and 170 MB the first time), set up to use only its bundled data."""
    for name, value in OFFLINE_ENVIRONMENT.items():
        os.environ.setdefault(name, value)
    import litellm

    litellm.disable_hf_tokenizer_download = True
    litellm.suppress_debug_info = True  # no "Give Feedback" banners on every error
    return litellm
