"""litellm's ``local/`` provider: GGUF models run in-process by llama.cpp — no server, no network.

``litellm.completion(model="local/gemma-3-270m", messages=...)`` (or ``local/<name>`` from
``[tool.rosetta.local_models]``, or ``local/path/to/model.gguf``) lands in :class:`LocalLLM`.
:func:`rosetta.local.litellm_offline.import_litellm` registers it; :func:`register` is the
public way to do the same before handing litellm to other code (``dspy.LM("local/...")``).
Registering is cheap: ``llama_cpp`` is imported and the model loaded on the first local call.

Design notes (the engine itself is the rest of :mod:`rosetta.local`: loading in ``models``,
KV-cache reuse in ``kv_cache``, grammars in ``grammar`` and ``gbnf``, the token loop in ``decoder``):

- Async calls do the locked work in a worker thread, so ``asyncio.gather`` of many calls neither
  blocks the loop nor races; a stream is generated in its own thread, so its reader never holds
  the model's lock.
- Base models (``prompt_style: completion``, or a GGUF without a chat template) get the messages
  as one plain text — no chat template (see :func:`completion_prompt`); the answer's leading
  whitespace is dropped. Other GGUFs get their own chat template.
- A ``json_schema`` answer parses, and validates where the grammar can express the schema,
  *unless* it is cut off by ``max_tokens`` (``finish_reason == "length"``) — give a budget that
  fits the largest answer the schema allows.
- ``tools`` are called through the grammar (:mod:`rosetta.local.tool_calls`): the reply is one
  call of a declared tool, with arguments shaped by its schema, or the answer; a call comes back as
  ``message.tool_calls``. With tools a stream gives the whole reply in one chunk (a call cannot be
  told from an answer before the reply's first key is decoded).
- Unknown parameters (``num_retries``, ``rollout_id``, ...) are ignored.
"""

from __future__ import annotations

import asyncio
import functools
import queue
import random
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from types import ModuleType
from typing import Any

from rosetta.third_party import import_litellm

litellm = import_litellm()  # the handler subclasses litellm's CustomLLM: litellm comes first, offline
from litellm.llms.custom_llm import CustomLLM  # noqa: E402
from litellm.types.utils import GenericStreamingChunk, ModelResponse  # noqa: E402

from rosetta.errors import Problem, RosettaError, UsageError  # noqa: E402
from rosetta.local.decoder import ODDS_TOKENS, Piece, Request, TokenOdds, generate  # noqa: E402
from rosetta.local.grammar import GrammarGate, answer_format, json_grammar  # noqa: E402
from rosetta.local.models import PROVIDER, hard, load_model  # noqa: E402
from rosetta.local.project import LocalSettings  # noqa: E402
from rosetta.local.tool_calls import as_text, read_reply, tool_turns  # noqa: E402
from rosetta.local.weights import catalog_models, resolve  # noqa: E402
from rosetta.providers.kinds import ANSWER_CUE  # noqa: E402

DEFAULT_MAX_TOKENS = 512
"""Answer budget when the caller gives none and the catalog has no ``max_output``."""
DEFAULT_TEMPERATURE = 0.8  # llama.cpp's default


def register() -> None:
    """Make ``litellm.completion(model="local/...")`` work in this process (idempotent, cheap)."""
    install(import_litellm())


def install(module: ModuleType) -> None:
    """Add the ``local`` provider to ``module.custom_provider_map``, keeping other entries (and a
    ``local`` entry someone registered before us)."""
    entries = list(module.custom_provider_map or [])
    if any(entry.get("provider") == PROVIDER for entry in entries):
        return
    module.custom_provider_map = [*entries, {"provider": PROVIDER, "custom_handler": LocalLLM()}]
    # litellm adds custom providers to provider_list at each completion call; do it now, so that
    # get_llm_provider("local/...") also works before the first call
    from litellm.utils import custom_llm_setup

    custom_llm_setup()
    # what the catalog's local models can do, for code that asks litellm (DSPy's JSONAdapter then
    # sends the signature's schema, which the grammar enforces); they cost nothing
    module.register_model({model.id: {
        "litellm_provider": PROVIDER, "mode": "chat", "max_input_tokens": model.context_window,
        "max_output_tokens": model.max_output, "supports_response_schema": True,
        "supports_function_calling": True, "input_cost_per_token": 0.0, "output_cost_per_token": 0.0,
        "cache_creation_input_token_cost": 0.0, "cache_read_input_token_cost": 0.0,
    } for model in catalog_models()})


def completion_prompt(messages: list[dict[str, Any]]) -> str:
    """The plain text a base model continues: user and system texts joined by blank lines, an
    assistant text after one space (the previous text ends with its answer cue), and a final user
    text that does not end in ``:`` gets ``\\nAnswer:`` so the model starts answering."""
    prompt = ""
    for message in messages:
        text = _text(message.get("content"))
        if message.get("role") == "assistant":
            prompt += " " + text
        else:
            prompt += ("\n\n" if prompt else "") + text
    if messages and messages[-1].get("role") != "assistant" and not prompt.rstrip().endswith(":"):
        prompt += "\n" + ANSWER_CUE
    return prompt


class LocalLLM(CustomLLM):
    """The litellm handler; every method takes litellm's custom-handler keyword arguments."""

    def completion(self, *args: Any, **kwargs: Any) -> ModelResponse:
        request = _prepare(kwargs)
        text, finish, usage = _collect(request)
        return _response(kwargs["model_response"], request, text, finish, usage)

    def streaming(self, *args: Any, **kwargs: Any) -> Iterator[GenericStreamingChunk]:
        request = _prepare(kwargs)  # errors surface at the call, not at the first chunk
        return _stream(request)

    async def acompletion(self, *args: Any, **kwargs: Any) -> ModelResponse:
        return await asyncio.to_thread(self.completion, **kwargs)

    async def astreaming(self, *args: Any, **kwargs: Any) -> AsyncIterator[GenericStreamingChunk]:
        # an async generator: litellm iterates what this call returns without awaiting it, so
        # mistakes surface at the first chunk
        request = await asyncio.to_thread(_prepare, kwargs)
        async for chunk in _astream(request):
            yield chunk


# -- errors -----------------------------------------------------------------------------------

def _errors_as_litellm(function: Callable[..., Any]) -> Callable[..., Any]:
    """Turn rosetta's UsageError (bad name, missing extra, tampered file) into BadRequestError."""
    @functools.wraps(function)
    def wrapper(kwargs: dict[str, Any]) -> Any:
        try:
            return function(kwargs)
        except RosettaError as exc:
            raise hard(str(exc), f"{PROVIDER}/{kwargs.get('model')}") from exc
    return wrapper


# -- requests ---------------------------------------------------------------------------------

@_errors_as_litellm
def _prepare(kwargs: dict[str, Any]) -> Request:
    """Resolve the model, load it, build the prompt and check every parameter."""
    local = resolve(f"{PROVIDER}/{kwargs['model']}", LocalSettings.of_call(kwargs))  # the name comes without
    # its provider; the project's settings with the call (the runtime's), else the working directory's
    model = local.id
    params: Mapping[str, Any] = kwargs.get("optional_params") or {}
    if (params.get("n") or 1) != 1:
        raise hard(f"{model} gives one answer per call (n={params['n']})", model)
    wants_json, schema = answer_format(params.get("response_format"), model)
    turns = tool_turns(params, (schema or {"type": "object"}) if wants_json else None)
    grammar = json_grammar(turns.schema(), model) if turns is not None \
        else json_grammar(schema, model) if wants_json else None
    messages = as_text(list(kwargs.get("messages") or []), turns)
    loaded = load_model(local)
    llm = loaded.llm
    if loaded.style == "completion":
        tokens = llm.tokenize(completion_prompt(messages).encode("utf-8"), add_bos=True, special=False)
        extra_stop: list[str] = []
    else:
        formatted = loaded.formatter(messages=[{**m, "content": _text(m.get("content"))} for m in messages])
        tokens = llm.tokenize(formatted.prompt.encode("utf-8"), add_bos=not formatted.added_special, special=True)
        extra_stop = [s for s in _stops(formatted.stop)]
    room = llm.n_ctx() - len(tokens)
    if room <= 0:
        raise litellm.ContextWindowExceededError(
            message=f"the prompt has {len(tokens)} tokens; {model} is loaded with a {llm.n_ctx()}-token context",
            model=model, llm_provider=PROVIDER)
    requested = params.get("max_completion_tokens") or params.get("max_tokens") or local.max_output \
        or DEFAULT_MAX_TOKENS
    temperature = params.get("temperature")
    sampling: dict[str, Any] = {"temp": max(0.0, float(DEFAULT_TEMPERATURE if temperature is None else temperature))}
    for name, kind, target in _SAMPLING:
        if params.get(name) is not None:
            sampling[target] = kind(params[name])
    seed = params.get("seed")
    seed = random.getrandbits(32) if seed is None else int(seed)  # llama.cpp would reuse its last seed
    odds = TokenOdds(llm, int(params.get("top_logprobs") or 0)) if params.get("logprobs") else None
    gate = None if grammar is None else GrammarGate(loaded, grammar, sampling.get("top_k", 40), model,
                                                    full_scan=ODDS_TOKENS if odds else 0)
    return Request(model, loaded, tokens, max(1, min(int(requested), room)), _stops(params.get("stop")) + extra_stop,
                   sampling, seed, gate, loaded.style == "completion", logprobs=odds, tools=turns)


_SAMPLING: tuple[tuple[str, type, str], ...] = (
    ("top_p", float, "top_p"), ("top_k", int, "top_k"), ("min_p", float, "min_p"),
    ("presence_penalty", float, "presence_penalty"), ("frequency_penalty", float, "frequency_penalty"),
    ("repeat_penalty", float, "repeat_penalty"), ("repetition_penalty", float, "repeat_penalty"),
)
"""Sampling parameters passed on to llama.cpp: (request name, type, llama.cpp name)."""


def _text(content: Any) -> str:
    """A message's text (string, or text content parts); local models read nothing else."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = list(content)
    others = sorted({str(p.get("type")) if isinstance(p, dict) else type(p).__name__
                     for p in parts if not (isinstance(p, dict) and p.get("type") == "text")})
    if others:
        raise UsageError(Problem(f"local models read text only, not {', '.join(others)} content", field="messages"))
    return "".join(str(p.get("text", "")) for p in parts)


def _stops(stop: Any) -> list[str]:
    if not stop:
        return []
    return [s for s in ([stop] if isinstance(stop, str) else stop) if s]


def _collect(request: Request) -> tuple[str, str, dict[str, int]]:
    with request.loaded.lock:
        pieces = list(generate(request))
    last = pieces[-1]
    return "".join(p.text for p in pieces), last.finish or "stop", _usage(last)


def _usage(piece: Piece) -> dict[str, int]:
    return {"prompt_tokens": piece.prompt_tokens, "completion_tokens": piece.completion_tokens,
            "total_tokens": piece.prompt_tokens + piece.completion_tokens}


def _response(response: ModelResponse, request: Request, text: str, finish: str,
              usage: dict[str, int]) -> ModelResponse:
    content, calls = _reply(request, text, finish)
    message = response.choices[0].message  # type: ignore[union-attr]
    message.content = content
    if calls:
        from litellm.types.utils import ChatCompletionMessageToolCall

        message.tool_calls = [ChatCompletionMessageToolCall(**call) for call in calls]
        finish = "tool_calls"
    response.choices[0].finish_reason = finish
    response.model = request.model
    response.created = request.created
    response.usage = litellm.Usage(**usage)  # type: ignore[attr-defined]
    if request.logprobs is not None:
        from litellm.types.utils import ChoiceLogprobs

        response.choices[0].logprobs = ChoiceLogprobs(content=request.logprobs.content)  # type: ignore[union-attr]
    return response


def _reply(request: Request, text: str, finish: str) -> tuple[str | None, list[dict[str, Any]]]:
    """The message's content and tool calls: the text as decoded, unless the request offered tools."""
    if request.tools is None or finish == "length":  # a reply cut off is shown as it is
        return text, []
    return read_reply(text, request.tools)


def _chunk(piece: Piece) -> GenericStreamingChunk:
    last = piece.finish is not None
    return GenericStreamingChunk(text=piece.text, tool_use=None, is_finished=last, finish_reason=piece.finish or "",
                                 usage=_usage(piece) if last else None, index=0)  # type: ignore[typeddict-item]


def _whole_reply(request: Request, text: str, finish: str, usage: dict[str, int]) -> GenericStreamingChunk:
    """A reply to a request with tools, as one streamed chunk (a call, or the answer's text)."""
    content, calls = _reply(request, text, finish)
    tool_use = None if not calls else {**calls[0], "index": 0}
    return GenericStreamingChunk(text=content or "", tool_use=tool_use, is_finished=True,  # type: ignore[typeddict-item]
                                 finish_reason="tool_calls" if calls else finish, usage=usage, index=0)


_DONE = object()


def _produce(request: Request, put: Callable[[Any], None], cancelled: threading.Event) -> None:
    """Run a generation in its own thread, handing each piece (then _DONE, or the error) to ``put``.

    The consumer never holds the model's lock, so it may call the same model while it reads.
    """
    try:
        with request.loaded.lock:
            for piece in generate(request, cancelled):
                put(piece)
    except BaseException as exc:  # handed to the consumer, which raises it
        put(exc)
    put(_DONE)


def _stream(request: Request) -> Iterator[GenericStreamingChunk]:
    if request.tools is not None:
        yield _whole_reply(request, *_collect(request))
        return
    pieces: queue.SimpleQueue[Any] = queue.SimpleQueue()
    cancelled = threading.Event()
    threading.Thread(target=_produce, args=(request, pieces.put, cancelled), daemon=True,
                     name="rosetta-local-stream").start()
    try:
        while (item := pieces.get()) is not _DONE:
            if isinstance(item, BaseException):
                raise item
            yield _chunk(item)
    finally:
        cancelled.set()  # the reader stopped early: end the generation at the next token


async def _astream(request: Request) -> AsyncIterator[GenericStreamingChunk]:
    if request.tools is not None:
        yield _whole_reply(request, *await asyncio.to_thread(_collect, request))
        return
    loop = asyncio.get_running_loop()
    pieces: asyncio.Queue[Any] = asyncio.Queue()
    cancelled = threading.Event()

    def put(item: Any) -> None:
        try:
            loop.call_soon_threadsafe(pieces.put_nowait, item)
        except RuntimeError:  # the loop closed under a reader that went away
            cancelled.set()

    threading.Thread(target=_produce, args=(request, put, cancelled), daemon=True,
                     name="rosetta-local-astream").start()
    try:
        while (item := await pieces.get()) is not _DONE:
            if isinstance(item, BaseException):
                raise item
            yield _chunk(item)
    finally:
        cancelled.set()

