"""Loading the embedded models: one llama.cpp model per weights file per process, kept, with the
lock every use of it holds (llama.cpp is not thread-safe) and the contexts (KV caches) over it.

Two models loaded in one process share nothing but llama.cpp's library: each has its own lock,
contexts and chat formatter, keyed by its file."""

from __future__ import annotations

import atexit
import ctypes
import logging
import threading
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from rosetta.local.threads import thread_count
from rosetta.local.weights import INSTALL_HINT, LocalModel, prompt_style
from rosetta.third_party import import_litellm

PROVIDER = "local"
CONTEXT_TOKENS = 8192
"""KV-cache size per context (≈150 MB for Gemma 3 270M); longer prompts are refused as context errors."""
BATCH = 32
"""Prompt tokens per llama.cpp batch, and the unit of KV-cache reuse (see :func:`rosetta.local.kv_cache.reuse`)."""


def hard(message: str, model: str) -> Exception:
    """A caller mistake, as litellm's BadRequestError: rosetta's retry policy does not retry it."""
    return import_litellm().BadRequestError(message=message, model=model, llm_provider=PROVIDER)


@dataclass
class Loaded:
    """A model kept in memory, with the lock every use of it holds."""

    llm: Any  # llama_cpp.Llama
    vocab: Any  # for end-of-generation checks
    style: str  # "completion" | "chat"
    lock: threading.Lock
    local: LocalModel  # what a new context loads
    formatter: Any = None  # llama_cpp Jinja2ChatFormatter for chat models
    contexts: list[Context] = field(default_factory=list)  # least recently used first (see kv_cache.pick)


@dataclass
class Context:
    """One llama.cpp context over the loaded model, and the prompt tokens whose KV cache it holds
    (see :func:`rosetta.local.kv_cache.reuse`)."""

    llm: Any  # llama_cpp.Llama
    cached: list[int] = field(default_factory=list)


_models: dict[tuple[str, int, int], Loaded] = {}
_model_locks: dict[tuple[str, int, int], threading.Lock] = {}
_registry_lock = threading.Lock()
_log_callback: Any = None
log = logging.getLogger("rosetta.local.llama_cpp")


def llama_cpp_module(model: str) -> ModuleType:
    """llama_cpp, its messages routed to logging; a BadRequestError naming the extra when it is missing."""
    try:
        import llama_cpp
    except ImportError:
        raise hard(f"{model} runs on llama.cpp, which is not installed: {INSTALL_HINT}", model) from None
    global _log_callback
    if _log_callback is None:  # llama.cpp's own messages go to logging, not straight to stderr
        @llama_cpp.llama_log_callback
        def callback(level: int, text: bytes, user_data: Any) -> None:
            # ggml levels: 1 debug, 2 info, 3 warn, 4 error, 5 continued; llama.cpp warns about trivia
            log.log(logging.ERROR if level == 4 else logging.DEBUG, "%s", text.decode("utf-8", "replace").rstrip())

        _log_callback = callback  # ctypes needs the callback object kept alive
        llama_cpp.llama_log_set(callback, ctypes.c_void_p(0))
    return llama_cpp


def load_model(local: LocalModel) -> Loaded:
    """The loaded model for ``local``, loading it on first use."""
    stat = local.path.stat()
    key = (str(local.path), stat.st_size, stat.st_mtime_ns)
    with _registry_lock:
        loaded = _models.get(key)
        if loaded is not None:
            return loaded
        lock = _model_locks.setdefault(key, threading.Lock())
    with lock:
        loaded = _models.get(key)
        if loaded is None:
            if not _models:
                atexit.register(_close_all)
            loaded = _models[key] = _new_model(local, lock)
    return loaded


def _close_all() -> None:
    """Free the models while llama_cpp still exists: left to interpreter shutdown, its finalizers
    run after the module's globals are gone and print tracebacks."""
    for loaded in list(_models.values()):
        if loaded.lock.acquire(timeout=5):  # an abandoned stream's thread may still be generating
            for context in loaded.contexts:
                context.llm.close()
            loaded.lock.release()
    _models.clear()


def _new_model(local: LocalModel, lock: threading.Lock) -> Loaded:
    llama_cpp = llama_cpp_module(local.id)
    llm = new_context(local)
    style = prompt_style(local, llm.metadata)
    formatter = None
    if style == "chat":
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        def text(token: int) -> str:
            return llm._model.token_get_text(token) if token != -1 else ""

        formatter = Jinja2ChatFormatter(template=llm.metadata["tokenizer.chat_template"],
                                        eos_token=text(llm.token_eos()), bos_token=text(llm.token_bos()))
    return Loaded(llm, llama_cpp.llama_model_get_vocab(llm.model), style, lock, local, formatter, [Context(llm)])



def new_context(local: LocalModel) -> Any:
    """A llama.cpp context over ``local``'s weights (mapped, so a second one shares them)."""
    llama_cpp = llama_cpp_module(local.id)
    threads = thread_count(local.threads)
    n_ctx = min(local.context_window or CONTEXT_TOKENS, CONTEXT_TOKENS)
    try:
        return llama_cpp.Llama(model_path=str(local.path), n_ctx=n_ctx, n_batch=BATCH, n_ubatch=BATCH,
                               n_threads=threads, n_threads_batch=threads, verbose=False)
    except (ValueError, RuntimeError) as exc:
        raise hard(f"llama.cpp cannot load {local.path}: {exc}", local.id) from None
