"""The embedded inference engine: GGUF models run in-process by llama.cpp behind litellm's
``local/`` provider — no server, no network.

One module per concern: ``weights`` (which file a name means, pinned weights assembled from their
packages), ``models`` (loading, one lock per model), ``kv_cache`` (which context's cache a prompt
reuses), ``gbnf`` and ``grammar`` (JSON Schema → grammar, constrained decoding), ``decoder`` (the
token loop), ``threads`` (how many CPUs), ``provider`` (litellm's handler), ``litellm_offline``
(litellm with that handler registered) and ``revision`` (which build answered). A new embedded
model is a catalog entry plus its weights, not code.
"""
