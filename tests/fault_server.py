"""A real OpenAI-compatible HTTP server on 127.0.0.1 that plays scripted faults.

Each POST to /v1/chat/completions takes the next step of the script (the last step repeats):
("ok", content) · ("tool", name, arguments) · ("status", code, {headers}) ·
("stall", seconds[, content]) answers late (with content, else "{}") ·
("body", status, text[, content_type]) sends that body as is (an HTML page, a stream without choices;
bytes are sent unencoded, e.g. invalid UTF-8) ·
("drop",) closes the connection without answering · ("reset",) resets it (TCP RST) without
answering · ("garbage",) sends malformed JSON · ("empty",) is a well-formed completion with no choices ·
("context",) is OpenAI's context-length-exceeded 400 · ("reply", answer[, seconds]) answers
``answer(body["messages"])`` (after ``seconds``, e.g. a model's latency) ·
("flaky", p) answers 503 with probability p (seeded), else a valid triage answer that echoes the
request's `[call N]` marker, so a test can tell every answer belongs to its own call;
("flaky", p, [fault, ...]) plays one of those faults (picked at random, seeded) instead of the 503;
("flaky", p, [fault, ...], seconds) answers its successes that late (failures come back at once).
Requests are recorded (path, body, arrival time and Authorization header) so tests can assert attempts and delays;
``peak`` is the most requests the server was working on at once, ``faults`` how many faults the
flaky steps played.
A POST to a path ending in /messages is answered in Anthropic's Messages format (an "ok" step for
a request that forces a tool becomes that tool's input), so fallbacks can cross providers. An "ok"
step asked to stream is sent as server-sent events in the format of the path (OpenAI's chunks, or
Anthropic's events), a small delta per event.
"""

from __future__ import annotations

import json
import random
import re
import socket
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FaultServer:
    def __init__(self, script: list[tuple] | None = None) -> None:
        self.script: list[tuple] = list(script or [("ok", "{}")])
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.random = random.Random(7)
        self.active = 0
        self.peak = 0
        self.faults = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server naming)
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with server.lock:
                    server.requests.append({"path": self.path, "body": body, "time": time.monotonic(),
                                            "authorization": self.headers.get("Authorization")})
                    step = server.script.pop(0) if len(server.script) > 1 else server.script[0]
                    server.active += 1
                    server.peak = max(server.peak, server.active)
                try:
                    server.play(self, step, body)
                finally:
                    with server.lock:
                        server.active -= 1

        class Server(ThreadingHTTPServer):
            request_queue_size = 1024  # the load test opens hundreds of connections at once

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # a client that gave up on a stall closed its end: expected, not worth a traceback

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> FaultServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def play(self, handler: BaseHTTPRequestHandler, step: tuple, body: dict[str, Any]) -> None:
        kind = step[0]
        if kind == "flaky":
            with self.lock:
                fail = self.random.random() < step[1]
                fault = self.random.choice(step[2]) if fail and len(step) > 2 else None
                self.faults += fail
            if fault is not None:
                self.play(handler, fault, body)
                return
            if fail:
                self._send(handler, 503, json.dumps({"error": {"message": "flaky 503", "code": 503}}), {})
                return
            if len(step) > 3:  # a slow success, after fast failures
                time.sleep(step[3])
            text = json.dumps(body.get("messages", []))
            marker = re.search(r"\[call \d+\]", text)
            answer = {"severity": "medium", "rationale": f"Answer for {marker.group(0) if marker else '?'}."}
            step = ("ok", json.dumps(answer))
            kind = "ok"
        if kind in ("drop", "reset"):
            if kind == "reset":  # linger 0: close() sends RST instead of FIN
                handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            handler.close_connection = True
            handler.connection.close()
            return
        if kind == "stall":
            time.sleep(step[1])
            step = ("ok", step[2] if len(step) > 2 else "{}")
            kind = "ok"
        if kind == "reply":
            if len(step) > 2:
                time.sleep(step[2])
            step = ("ok", step[1](body.get("messages", [])))
            kind = "ok"
        if kind == "status":
            payload = json.dumps({"error": {"message": f"scripted {step[1]}", "type": "scripted", "code": step[1]}})
            self._send(handler, step[1], payload, step[2] if len(step) > 2 else {})
            return
        if kind == "context":
            payload = json.dumps({"error": {
                "message": "This model's maximum context length is 128000 tokens. However, your messages resulted "
                           "in 190000 tokens.", "type": "invalid_request_error", "code": "context_length_exceeded"}})
            self._send(handler, 400, payload, {})
            return
        if kind == "body":
            self._send(handler, step[1], step[2], {"Content-Type": step[3] if len(step) > 3 else "text/html"})
            return
        if kind == "garbage":
            self._send(handler, 200, '{"id": "x", "choices": [', {})
            return
        if kind == "empty":
            empty = {"id": "chatcmpl-empty", "object": "chat.completion", "created": 0,
                     "model": body.get("model", "scripted"), "choices": [],
                     "usage": {"prompt_tokens": 12, "completion_tokens": 0, "total_tokens": 12}}
            if body.get("stream"):  # chunks without choices, as a filtering proxy's first chunk is
                chunk = {**empty, "object": "chat.completion.chunk"}
                self._send(handler, 200, f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n",
                           {"Content-Type": "text/event-stream"})
            else:
                self._send(handler, 200, json.dumps(empty), {})
            return
        if handler.path.rstrip("/").endswith("/messages") and kind == "ok":
            if body.get("stream"):
                self._anthropic_stream(handler, step[1], body)
            else:
                self._anthropic(handler, step[1], body)
            return
        message: dict[str, Any] = {"role": "assistant", "content": None}
        finish = "stop"
        if kind == "ok":
            message["content"] = step[1]
        elif kind == "tool":
            message["tool_calls"] = [{"id": "call_1", "type": "function",
                                      "function": {"name": step[1], "arguments": step[2]}}]
            finish = "tool_calls"
        if body.get("stream") and kind == "ok":
            self._stream(handler, step[1], body)
            return
        payload = json.dumps({
            "id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": 0,
            "model": body.get("model", "scripted"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 8, "total_tokens": 20},
        })
        self._send(handler, 200, payload, {})

    def _anthropic(self, handler: BaseHTTPRequestHandler, content: str, body: dict[str, Any]) -> None:
        forced = (body.get("tool_choice") or {}).get("name")
        block = ({"type": "tool_use", "id": "toolu_1", "name": forced, "input": json.loads(content)} if forced
                 else {"type": "text", "text": content})
        payload = json.dumps({"id": f"msg_{len(self.requests)}", "type": "message", "role": "assistant",
                              "model": body.get("model", "scripted"), "content": [block],
                              "stop_reason": "tool_use" if forced else "end_turn", "stop_sequence": None,
                              "usage": {"input_tokens": 12, "output_tokens": 8}})
        self._send(handler, 200, payload, {})

    @staticmethod
    def _anthropic_stream(handler: BaseHTTPRequestHandler, content: str, body: dict[str, Any]) -> None:
        """Anthropic's streamed Messages events, one small text (or tool input) delta per event."""
        forced = (body.get("tool_choice") or {}).get("name")
        start = ({"type": "tool_use", "id": "toolu_1", "name": forced, "input": {}} if forced
                 else {"type": "text", "text": ""})
        kind, field = ("input_json_delta", "partial_json") if forced else ("text_delta", "text")
        pieces = [content[i:i + 8] for i in range(0, len(content), 8)] or [""]
        message = {"id": "msg_s", "type": "message", "role": "assistant", "model": body.get("model", "scripted"),
                   "content": [], "stop_reason": None, "stop_sequence": None,
                   "usage": {"input_tokens": 12, "output_tokens": 1}}
        events = [("message_start", {"type": "message_start", "message": message}),
                  ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": start}),
                  *(("content_block_delta", {"type": "content_block_delta", "index": 0,
                                             "delta": {"type": kind, field: piece}}) for piece in pieces),
                  ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                  ("message_delta", {"type": "message_delta", "delta": {
                      "stop_reason": "tool_use" if forced else "end_turn", "stop_sequence": None},
                      "usage": {"output_tokens": 8}}),
                  ("message_stop", {"type": "message_stop"})]
        data = "".join(f"event: {name}\ndata: {json.dumps(event)}\n\n" for name, event in events).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    @staticmethod
    def _stream(handler: BaseHTTPRequestHandler, content: str, body: dict[str, Any]) -> None:
        """Server-sent events, one small delta per chunk, as the OpenAI API streams."""
        pieces = [content[i:i + 8] for i in range(0, len(content), 8)] or [""]
        events = []
        for index, piece in enumerate(pieces):
            delta = {"content": piece} if index else {"role": "assistant", "content": piece}
            events.append({"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 0,
                           "model": body.get("model", "scripted"),
                           "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
        events.append({"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 0,
                       "model": body.get("model", "scripted"),
                       "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        data = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        encoded = data.encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Content-Length", str(len(encoded)))
        handler.end_headers()
        handler.wfile.write(encoded)

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, payload: str | bytes, headers: dict[str, str]) -> None:
        data = payload if isinstance(payload, bytes) else payload.encode()
        handler.send_response(status)
        handler.send_header("Content-Type", headers.get("Content-Type", "application/json"))
        handler.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            if name != "Content-Type":
                handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(data)
