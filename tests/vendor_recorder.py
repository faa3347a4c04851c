"""A real HTTP server on 127.0.0.1 that records every request and answers in the vendor's own format.

It speaks just enough of each API for litellm to parse the answer, so the contract tests can read
the exact bodies (and signatures) litellm put on the wire:

- OpenAI Chat Completions: POST ``.../chat/completions`` → a ``chat.completion`` (an SSE stream of
  ``chat.completion.chunk`` events ending with ``data: [DONE]`` when the body says ``"stream": true``),
  carrying ``service_tier`` and ``system_fingerprint`` as OpenAI's and Groq's answers do (litellm's
  Groq route reads ``service_tier`` off every non-streamed answer and fails where it is missing);
- Anthropic Messages: POST ``.../v1/messages``, and Vertex AI's Claude route
  ``.../publishers/anthropic/models/{model}:rawPredict`` (``:streamRawPredict``) → a ``message``
  (Anthropic's SSE events when streaming);
- Gemini, on Google AI Studio or Vertex AI: POST ``.../models/{model}:generateContent`` → a
  ``GenerateContentResponse``, and ``:streamGenerateContent?alt=sse`` → the same as ``data:`` chunks;
- Bedrock Converse: POST ``/model/{model id}/converse`` → a ``ConverseResponse``, and
  ``/converse-stream`` → its events as AWS event-stream frames;
- Google's OAuth token endpoint: POST ``/token`` with a JWT bearer grant (what a service-account
  credential sends to its ``token_uri``) → ``access_token``, so Vertex AI calls can be signed offline.

Point litellm at it with ``api_base``: ``openai_base`` (litellm appends ``/chat/completions``),
``anthropic_base`` (litellm appends ``/v1/messages``), ``gemini_base`` (litellm appends
``/models/{model}:{method}``), and ``root`` for Bedrock and Vertex AI (litellm appends the
provider's whole path); tests/cloud_credentials.py sets up the credentials those cloud routes sign
with. Every answer's text is ``answer`` (JSON text, so structured agents can parse it); a request
that forces a tool, by name or by requiring a call while it offers just one tool, gets that tool's
call instead, its input being the answer. Whether the agent accepts it does not matter here:
corrections are more requests to record. Any other path is a 404, so a request that went somewhere
unexpected fails loudly.

With ``tools``, a function of the tool results a request carries (their texts, in order, read from
OpenAI's ``tool`` messages, Anthropic's ``tool_result`` blocks or Gemini's ``functionResponse``
parts), the server plays a model that uses the agent's tools: when it returns calls (name and
arguments each) it answers with those calls in the vendor's own shape, several at once if it
returns several; when it returns None, with ``answer``.
"""

from __future__ import annotations

import json
import re
import secrets
import struct
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, parse_qsl, urlsplit

ROUTES: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(pattern), method) for pattern, method in (
    (r"/chat/completions$", "_openai"),
    (r"/v1/messages$|/publishers/anthropic/models/[^/:]+:(rawPredict|streamRawPredict)$", "_anthropic"),
    (r"/models/[^/:]+:(generateContent|streamGenerateContent)$", "_gemini"),
    (r"^/model/[^/]+/(converse|converse-stream)$", "_converse"),
    (r"^/token$", "_token"),
))
"""Which answer each path gets (the first pattern found in it); anything else is a 404."""
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"


@dataclass(frozen=True)
class Recorded:
    """One request as it arrived."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any  # the parsed JSON body, a form body's fields, or None when there was none
    raw: bytes = b""  # the body's bytes, as signed (SigV4 signs their hash)


class VendorRecorder:
    """``with VendorRecorder(answer) as server:`` serves until the block ends; ``server.requests``
    lists what arrived, in order."""

    def __init__(self, answer: str = "{}", *,
                 tools: Callable[[list[str]], list[tuple[str, Any]] | None] | None = None,
                 unavailable: Callable[[Recorded], bool] | None = None) -> None:
        self.answer = answer
        self.tools = tools
        self.unavailable = unavailable  # requests answered 503 (recorded all the same)
        self.access_token = f"ya29.recorder-{secrets.token_hex(8)}"
        """What the token endpoint grants, one per server: a request signed with it got its token here."""
        self.requests: list[Recorded] = []
        self.lock = threading.Lock()
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server naming)
                recorder.handle(self)

            do_GET = do_PUT = do_DELETE = do_POST  # noqa: N815 (recorded too, then refused: none is expected)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    @property
    def openai_base(self) -> str:
        return f"{self.root}/v1"

    @property
    def anthropic_base(self) -> str:
        return self.root

    @property
    def gemini_base(self) -> str:
        return f"{self.root}/v1beta"

    @property
    def token_uri(self) -> str:
        """Where a service-account credential gets its access token (its ``token_uri``)."""
        return f"{self.root}/token"

    def base_for(self, provider: str) -> str:
        """The ``api_base`` that makes litellm's ``provider`` route hit this server."""
        return {"openai": self.openai_base, "anthropic": self.anthropic_base, "gemini": self.gemini_base}[provider]

    def __enter__(self) -> VendorRecorder:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # -- answering ---------------------------------------------------------------------------

    def handle(self, handler: BaseHTTPRequestHandler) -> None:
        """Record the request, then answer it in the format its path names."""
        url = urlsplit(handler.path)
        length = int(handler.headers.get("Content-Length", 0))
        raw = handler.rfile.read(length) if length else b""
        body = _parse_body(raw, handler.headers.get("Content-Type", ""))
        recorded = Recorded(handler.command, url.path, parse_qs(url.query), dict(handler.headers), body, raw)
        with self.lock:
            self.requests.append(recorded)
        route = next((method for pattern, method in ROUTES if pattern.search(url.path)), None)
        if self.unavailable is not None and self.unavailable(recorded):
            _send(handler, 503, "application/json", json.dumps({"error": {"message": "overloaded", "code": 503}}))
        elif handler.command != "POST" or not isinstance(body, dict):
            _send(handler, 404, "application/json", json.dumps({"error": {"message": "not a vendor API call"}}))
        elif route is None:
            _send(handler, 404, "application/json", json.dumps({"error": {"message": f"no route {url.path}"}}))
        else:
            getattr(self, route)(handler, body, url.path)

    def _calls(self, results: list[str]) -> list[tuple[str, str, Any]]:
        """The agent's tool calls to answer with (id, name, arguments), or none: then ``answer``."""
        if self.tools is None:
            return []
        wanted = self.tools(results) or []
        return [(f"call_{len(results)}_{n}", name, arguments) for n, (name, arguments) in enumerate(wanted)]

    def _openai(self, handler: BaseHTTPRequestHandler, body: dict[str, Any], path: str) -> None:
        forced = _forced_openai(body)
        calls = [] if forced else self._calls([str(m.get("content")) for m in _items(body.get("messages"))
                                              if isinstance(m, dict) and m.get("role") == "tool"])
        if calls:  # the agent's tools, after a line of text (streamed as a model would say it)
            tool_calls = [{"id": id_, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
                          for id_, name, args in calls]
            message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": tool_calls}
            deltas = [{"role": "assistant", "content": "Looking it up. "},
                      *({"tool_calls": [{"index": n, **call}]} for n, call in enumerate(tool_calls))]
        elif forced:
            call = {"id": "call_rec", "type": "function", "function": {"name": forced, "arguments": self.answer}}
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            deltas = [{"role": "assistant", "tool_calls": [{"index": 0, **call}]}]
        else:
            message = {"role": "assistant", "content": self.answer}
            deltas = [message]
        finish = "tool_calls" if "tool_calls" in message else "stop"
        head = {"id": "chatcmpl-rec", "created": 0, "model": body.get("model", "recorded"),
                "service_tier": "default", "system_fingerprint": "fp_recorder"}
        if not body.get("stream"):
            _send(handler, 200, "application/json", json.dumps({
                **head, "object": "chat.completion",
                "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
                "usage": {"prompt_tokens": 12, "completion_tokens": 8, "total_tokens": 20}}))
            return
        chunk = {**head, "object": "chat.completion.chunk"}
        events = [*({**chunk, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]} for delta in deltas),
                  {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}]
        _send(handler, 200, "text/event-stream", "".join(f"data: {json.dumps(e)}\n\n" for e in events)
              + "data: [DONE]\n\n")

    def _anthropic(self, handler: BaseHTTPRequestHandler, body: dict[str, Any], path: str) -> None:
        forced = _forced_anthropic(body)
        calls = [] if forced else self._calls([_text_of(block.get("content")) for m in _items(body.get("messages"))
                                              for block in _items(_dig(m, "content"))
                                              if isinstance(block, dict) and block.get("type") == "tool_result"])
        if calls and not body.get("stream"):
            _send(handler, 200, "application/json", json.dumps({
                "id": "msg_rec", "type": "message", "role": "assistant", "model": body.get("model", "recorded"),
                "stop_reason": "tool_use", "stop_sequence": None, "usage": {"input_tokens": 12, "output_tokens": 8},
                "content": [{"type": "tool_use", "id": id_.replace("call", "toolu"), "name": name, "input": args}
                            for id_, name, args in calls]}))
            return
        if forced:
            block: dict[str, Any] = {"type": "tool_use", "id": "toolu_rec", "name": forced,
                                     "input": json.loads(self.answer)}
        else:
            block = {"type": "text", "text": self.answer}
        stop = "tool_use" if forced else "end_turn"
        message = {"id": "msg_rec", "type": "message", "role": "assistant", "model": body.get("model", "recorded"),
                   "stop_reason": stop, "stop_sequence": None, "usage": {"input_tokens": 12, "output_tokens": 8}}
        if not body.get("stream"):
            _send(handler, 200, "application/json", json.dumps({**message, "content": [block]}))
            return
        if forced:
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": self.answer}
        else:
            start, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": self.answer}
        events = [
            ("message_start", {"type": "message_start", "message": {
                **message, "content": [], "stop_reason": None, "usage": {"input_tokens": 12, "output_tokens": 1}}}),
            ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": start}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                               "usage": {"output_tokens": 8}}),
            ("message_stop", {"type": "message_stop"}),
        ]
        _send(handler, 200, "text/event-stream",
              "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events))

    def _gemini(self, handler: BaseHTTPRequestHandler, body: dict[str, Any], path: str) -> None:
        forced = _forced_gemini(body)
        calls = [] if forced else self._calls([
            json.dumps(part.get("functionResponse", part.get("function_response", {})).get("response"))
            for content in _items(body.get("contents")) for part in _items(_dig(content, "parts"))
            if isinstance(part, dict) and ("functionResponse" in part or "function_response" in part)])
        parts = ([{"functionCall": {"name": name, "args": args}} for _, name, args in calls] if calls
                 else [{"functionCall": {"name": forced, "args": json.loads(self.answer)}}] if forced
                 else [{"text": self.answer}])
        response = {"candidates": [{"content": {"role": "model", "parts": parts},
                                    "finishReason": "STOP", "index": 0}],
                    "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 8, "totalTokenCount": 20},
                    "modelVersion": "recorded"}
        if path.endswith(":streamGenerateContent"):
            _send(handler, 200, "text/event-stream", f"data: {json.dumps(response)}\r\n\r\n")
        else:
            _send(handler, 200, "application/json", json.dumps(response))

    def _converse(self, handler: BaseHTTPRequestHandler, body: dict[str, Any], path: str) -> None:
        forced = _forced_converse(body)
        stop = "tool_use" if forced else "end_turn"
        usage = {"inputTokens": 12, "outputTokens": 8, "totalTokens": 20}
        if not path.endswith("/converse-stream"):
            block = ({"toolUse": {"toolUseId": "tooluse_rec", "name": forced, "input": json.loads(self.answer)}}
                     if forced else {"text": self.answer})
            _send(handler, 200, "application/json", json.dumps({
                "output": {"message": {"role": "assistant", "content": [block]}}, "stopReason": stop,
                "usage": usage, "metrics": {"latencyMs": 1}}))
            return
        if forced:
            opening = [("contentBlockStart", {"contentBlockIndex": 0, "start": {
                "toolUse": {"toolUseId": "tooluse_rec", "name": forced}}})]
            delta: dict[str, Any] = {"toolUse": {"input": self.answer}}
        else:
            opening, delta = [], {"text": self.answer}
        events = [("messageStart", {"role": "assistant"}), *opening,
                  ("contentBlockDelta", {"contentBlockIndex": 0, "delta": delta}),
                  ("contentBlockStop", {"contentBlockIndex": 0}),
                  ("messageStop", {"stopReason": stop}),
                  ("metadata", {"usage": usage, "metrics": {"latencyMs": 1}})]
        _send(handler, 200, "application/vnd.amazon.eventstream",
              b"".join(event_stream_frame(name, payload) for name, payload in events))

    def _token(self, handler: BaseHTTPRequestHandler, body: dict[str, Any], path: str) -> None:
        if body.get("grant_type") != JWT_BEARER or body.get("assertion", "").count(".") != 2:
            _send(handler, 400, "application/json", json.dumps({
                "error": "invalid_grant", "error_description": f"expected grant_type {JWT_BEARER} with a JWT assertion"}))
            return
        _send(handler, 200, "application/json",
              json.dumps({"access_token": self.access_token, "expires_in": 3600, "token_type": "Bearer"}))


def _forced_openai(body: dict[str, Any]) -> str | None:
    choice = body.get("tool_choice")
    if _dig(choice, "type") == "function":
        return _dig(choice, "function", "name")
    if choice in ("required", "any"):  # "any": Mistral's spelling
        return _only([_dig(tool, "function", "name") for tool in _items(body.get("tools"))])
    return None


def _forced_anthropic(body: dict[str, Any]) -> str | None:
    choice = body.get("tool_choice")
    if _dig(choice, "type") == "tool":
        return _dig(choice, "name")
    if _dig(choice, "type") == "any":
        return _only([_dig(tool, "name") for tool in _items(body.get("tools"))])
    return None


def _forced_gemini(body: dict[str, Any]) -> str | None:
    # litellm writes some of these keys in snake_case, which the REST API accepts too
    config = (_dig(body, "toolConfig", "functionCallingConfig")
              or _dig(body, "tool_config", "function_calling_config"))
    if _dig(config, "mode") != "ANY":
        return None
    allowed = _dig(config, "allowedFunctionNames") or _dig(config, "allowed_function_names")
    declared = [_dig(function, "name") for tool in _items(body.get("tools"))
                for function in _items(_dig(tool, "functionDeclarations") or _dig(tool, "function_declarations"))]
    return _only(_items(allowed) or declared)


def _forced_converse(body: dict[str, Any]) -> str | None:
    choice = _dig(body, "toolConfig", "toolChoice")
    if _dig(choice, "tool") is not None:
        return _dig(choice, "tool", "name")
    if _dig(choice, "any") is not None:
        return _only([_dig(tool, "toolSpec", "name") for tool in _items(_dig(body, "toolConfig", "tools"))])
    return None


def _text_of(content: Any) -> str:
    """A tool result's text: Anthropic sends a string or a list of text blocks."""
    if isinstance(content, list):
        return "".join(str(_dig(block, "text") or "") for block in content)
    return str(content)


def _dig(value: Any, *keys: str | int) -> Any:
    """``value[key][key]...``, or None where the body has another shape (it is recorded all the same)."""
    for key in keys:
        try:
            value = value[key]
        except (KeyError, IndexError, TypeError):
            return None
    return value


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _only(names: list[Any]) -> str | None:
    """The one tool a call must use when it may use any of ``names``."""
    return names[0] if len(names) == 1 and isinstance(names[0], str) else None


def event_stream_frame(event_type: str, payload: dict[str, Any]) -> bytes:
    """One AWS event-stream message (``application/vnd.amazon.eventstream``): a prelude of total
    and header lengths with its CRC32, string headers naming the event, the JSON payload, and the
    whole message's CRC32, the way Bedrock frames each streamed Converse event."""
    headers = b"".join(_string_header(name, value) for name, value in (
        (":event-type", event_type), (":content-type", "application/json"), (":message-type", "event")))
    data = json.dumps(payload).encode()
    prelude = struct.pack(">II", 12 + len(headers) + len(data) + 4, len(headers))
    message = prelude + struct.pack(">I", zlib.crc32(prelude)) + headers + data
    return message + struct.pack(">I", zlib.crc32(message))


def _string_header(name: str, value: str) -> bytes:
    key, text = name.encode(), value.encode()
    return struct.pack(">B", len(key)) + key + struct.pack(">BH", 7, len(text)) + text  # 7: string


def _parse_body(raw: bytes, content_type: str) -> Any:
    """JSON as a value, a form as its fields; anything unreadable is kept as text so the contract
    check reports it."""
    if not raw:
        return None
    if content_type.startswith("application/x-www-form-urlencoded"):
        return dict(parse_qsl(raw.decode("utf-8", "replace")))
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")


def _send(handler: BaseHTTPRequestHandler, status: int, content_type: str, payload: str | bytes) -> None:
    data = payload.encode() if isinstance(payload, str) else payload
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
