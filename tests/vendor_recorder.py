"""A real HTTP server on 127.0.0.1 that records every request and answers in the vendor's own format.

It speaks just enough of three APIs for litellm to parse the answer, so the contract tests can read
the exact bodies litellm put on the wire:

- OpenAI Chat Completions: POST ``.../chat/completions`` → a ``chat.completion`` (an SSE stream of
  ``chat.completion.chunk`` events ending with ``data: [DONE]`` when the body says ``"stream": true``);
- Anthropic Messages: POST ``.../v1/messages`` → a ``message`` (Anthropic's SSE events when
  streaming); a request that forces a tool (``tool_choice`` type ``tool``) gets that tool's
  ``tool_use`` block, its input being the answer;
- Gemini: POST ``.../models/{model}:generateContent`` → a ``GenerateContentResponse``, and
  ``:streamGenerateContent?alt=sse`` → the same as ``data:`` chunks.

Point litellm at it with ``api_base``: ``openai_base`` (litellm appends ``/chat/completions``),
``anthropic_base`` (litellm appends ``/v1/messages``) and ``gemini_base`` (litellm appends
``/models/{model}:{method}``). Every answer's text is ``answer`` (JSON text, so structured agents
can parse it); whether the agent accepts it does not matter here: corrections are more requests to
record. Any other path is a 404, so a request that went somewhere unexpected fails loudly.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass(frozen=True)
class Recorded:
    """One request as it arrived."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any  # the parsed JSON body (None when there was none)


class VendorRecorder:
    """``with VendorRecorder(answer) as server:`` serves until the block ends; ``server.requests``
    lists what arrived, in order."""

    def __init__(self, answer: str = "{}") -> None:
        self.answer = answer
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
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")  # kept as text: the contract check then reports it
        with self.lock:
            self.requests.append(Recorded(handler.command, url.path, parse_qs(url.query), dict(handler.headers), body))
        if handler.command != "POST" or not isinstance(body, dict):
            _send(handler, 404, "application/json", json.dumps({"error": {"message": "not a vendor API call"}}))
        elif url.path.endswith("/chat/completions"):
            self._openai(handler, body)
        elif url.path.endswith("/v1/messages"):
            self._anthropic(handler, body)
        elif url.path.endswith((":generateContent", ":streamGenerateContent")):
            self._gemini(handler, body, stream=url.path.endswith(":streamGenerateContent"))
        else:
            _send(handler, 404, "application/json", json.dumps({"error": {"message": f"no route {url.path}"}}))

    def _openai(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        model = body.get("model", "recorded")
        if not body.get("stream"):
            _send(handler, 200, "application/json", json.dumps({
                "id": "chatcmpl-rec", "object": "chat.completion", "created": 0, "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": self.answer},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 12, "completion_tokens": 8, "total_tokens": 20}}))
            return
        chunk = {"id": "chatcmpl-rec", "object": "chat.completion.chunk", "created": 0, "model": model}
        events = [{**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": self.answer},
                                         "finish_reason": None}]},
                  {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]
        _send(handler, 200, "text/event-stream", "".join(f"data: {json.dumps(e)}\n\n" for e in events)
              + "data: [DONE]\n\n")

    def _anthropic(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        choice = body.get("tool_choice") if isinstance(body.get("tool_choice"), dict) else {}
        forced = choice.get("name") if choice.get("type") == "tool" else None
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

    def _gemini(self, handler: BaseHTTPRequestHandler, body: dict[str, Any], *, stream: bool) -> None:
        response = {"candidates": [{"content": {"role": "model", "parts": [{"text": self.answer}]},
                                    "finishReason": "STOP", "index": 0}],
                    "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 8, "totalTokenCount": 20},
                    "modelVersion": "recorded"}
        if stream:
            _send(handler, 200, "text/event-stream", f"data: {json.dumps(response)}\r\n\r\n")
        else:
            _send(handler, 200, "application/json", json.dumps(response))


def _send(handler: BaseHTTPRequestHandler, status: int, content_type: str, payload: str) -> None:
    data = payload.encode()
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
