"""litellm's cloud routes end to end, offline: each call goes over real HTTP to a recorder on
127.0.0.1 (tests/vendor_recorder.py), signed the way the cloud signs it (tests/cloud_credentials.py),
and litellm must parse the recorder's answer back into the same JSON.

Bedrock's SigV4 signature is recomputed from the fake secret over the recorded bytes, and the JWT a
Vertex AI service account sends the token endpoint is checked with the generated key, so "signed"
means signed, not merely that an Authorization header is there.
"""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cloud_credentials import (
    AWS_KEY_ID,
    AWS_REGION,
    AZURE_API_VERSION,
    FAKE_KEY,
    VERTEX_LOCATION,
    VERTEX_PROJECT,
    api_base_for,
    cloud_env,
)
from vendor_recorder import Recorded, VendorRecorder, event_stream_frame

ANSWER = {"label": "a", "why": "recorded"}
VERTEX = f"/v1/projects/{VERTEX_PROJECT}/locations/{VERTEX_LOCATION}/publishers"
OPENAI_LIKE = ("/v1/chat/completions", "/v1/chat/completions")
ROUTES: dict[str, tuple[str, str]] = {
    "azure/gpt-4o": ("/openai/deployments/gpt-4o/chat/completions",) * 2,
    "azure_ai/claude-haiku-4-5": ("/v1/anthropic/v1/messages",) * 2,
    "bedrock/anthropic.claude-sonnet-4-5-20250929-v1:0": (
        "/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse",
        "/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream"),
    "bedrock/us.amazon.nova-pro-v1:0": ("/model/us.amazon.nova-pro-v1%3A0/converse",
                                        "/model/us.amazon.nova-pro-v1%3A0/converse-stream"),
    "vertex_ai/gemini-2.5-pro": (f"{VERTEX}/google/models/gemini-2.5-pro:generateContent",
                                 f"{VERTEX}/google/models/gemini-2.5-pro:streamGenerateContent"),
    "vertex_ai/claude-sonnet-4-5@20250929": (f"{VERTEX}/anthropic/models/claude-sonnet-4-5@20250929:rawPredict",
                                             f"{VERTEX}/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict"),
    "groq/openai/gpt-oss-120b": OPENAI_LIKE,
    "openrouter/anthropic/claude-sonnet-4.5": OPENAI_LIKE,
    "mistral/mistral-large-latest": OPENAI_LIKE,
    "together_ai/meta-llama/Llama-3.3-70B-Instruct-Turbo": OPENAI_LIKE,
    "deepseek/deepseek-chat": OPENAI_LIKE,
    "xai/grok-4.3": OPENAI_LIKE,
    "fireworks_ai/accounts/fireworks/models/kimi-k2-instruct-0905": OPENAI_LIKE,
}
"""Per model: the path its call must reach, without and with streaming."""
MODES = ("run", "stream", "schema", "tool", "tool-stream", "tool-required")
"""Plain text; streamed text; ``response_format`` json_schema (which litellm turns into a forced
tool on Nova and Vertex Claude); a call forced by name; the same, streamed; ``tool_choice``
"required" with one tool (how rosetta forces its answer tool when the agent has tools too)."""
SCHEMA = {"type": "object", "properties": {"label": {"type": "string"}, "why": {"type": "string"}},
          "required": ["label", "why"], "additionalProperties": False}
TOOL = {"type": "function", "function": {"name": "respond", "description": "Give the answer.", "parameters": SCHEMA}}
OPTIONS: dict[str, dict[str, Any]] = {
    "run": {},
    "stream": {"stream": True},
    "schema": {"response_format": {"type": "json_schema",
                                   "json_schema": {"name": "verdict", "schema": SCHEMA, "strict": True}}},
    "tool": {"tools": [TOOL], "tool_choice": {"type": "function", "function": {"name": "respond"}}},
    "tool-stream": {"tools": [TOOL], "tool_choice": {"type": "function", "function": {"name": "respond"}},
                    "stream": True},
    "tool-required": {"tools": [TOOL], "tool_choice": "required"},
}
DROPPED = {("mistral/mistral-large-latest", "tool"), ("mistral/mistral-large-latest", "tool-stream")}
"""Calls litellm cannot make: see test_litellm_drops_a_named_tool_choice_on_mistral."""


@pytest.fixture(scope="module")
def offline() -> Iterator[None]:
    """No connection anywhere but 127.0.0.1 while the module runs."""
    real = socket.getaddrinfo

    def loopback_only(host: Any, *args: Any, **kwargs: Any) -> Any:
        if str(host) not in ("127.0.0.1", "localhost", "::1"):
            raise OSError(f"the cloud route tests stay on 127.0.0.1; something tried to reach {host}")
        return real(host, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket, "getaddrinfo", loopback_only)
        yield


@pytest.fixture(scope="module")
def served(offline: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VendorRecorder]:
    """One recorder, and credentials that sign requests to it, for the module."""
    with pytest.MonkeyPatch.context() as patch, VendorRecorder(json.dumps(ANSWER)) as server:
        cloud_env(server, patch, tmp_path_factory.mktemp("cloud"))
        yield server


def _complete(model: str, server: VendorRecorder, mode: str) -> tuple[str, list[Any]]:
    """Call litellm; return the text and the tool calls it parsed (joined, when streamed)."""
    from rosetta.local.litellm_offline import import_litellm
    from rosetta.runtime.drive import _close_stream

    litellm = import_litellm()
    result = litellm.completion(model=model, api_base=api_base_for(model, server), max_tokens=400, num_retries=0,
                                messages=[{"role": "user", "content": "Classify this report."}], **OPTIONS[mode])
    if not OPTIONS[mode].get("stream"):
        message = result.choices[0].message
        return message.content or "", list(message.tool_calls or [])
    deltas = [chunk.choices[0].delta for chunk in result if chunk.choices]
    # most routes' readers stop at the finish reason and leave the response open; collected during a
    # later request, it deadlocks on the connection pool's lock: close it as the runtime does
    _close_stream(result, finished=True)
    calls = [call for delta in deltas for call in (delta.tool_calls or [])]
    return "".join(delta.content or "" for delta in deltas), calls


CASES = [(model, mode) for model in ROUTES for mode in MODES if (model, mode) not in DROPPED]


@pytest.mark.parametrize(("model", "mode"), CASES, ids=[f"{model}:{mode}" for model, mode in CASES])
def test_a_cloud_route_reaches_the_recorder_signed_and_parses_its_answer(
        served: VendorRecorder, model: str, mode: str) -> None:
    server = served
    server.requests.clear()
    text, calls = _complete(model, server, mode)
    if mode.startswith("tool"):
        arguments = "".join(call.function.arguments or "" for call in calls)
        assert {call.function.name for call in calls} - {None} == {"respond"}, calls
        assert json.loads(arguments) == ANSWER, f"{model} ({mode}): tool arguments {arguments!r}"
    else:
        assert not calls, f"{model} ({mode}): unexpected tool calls {calls}"
        assert json.loads(text) == ANSWER, f"{model} ({mode}): text {text!r}"
    calls_made = [r for r in server.requests if r.path != "/token"]
    assert len(calls_made) == 1, [r.path for r in server.requests]
    request = calls_made[0]
    streams = bool(OPTIONS[mode].get("stream"))
    assert request.path == ROUTES[model][streams], f"{model} ({mode}) went to {request.path}"
    _check_signed(model, request, server)


def _header(request: Recorded, name: str) -> str | None:
    return next((value for key, value in request.headers.items() if key.lower() == name), None)


SIGNED: dict[str, Callable[[Recorded, VendorRecorder], bool]] = {
    "bedrock": lambda request, server: _sigv4_matches(request, server.root),
    # each recorder grants its own token, so a request carrying it got it from this recorder's /token
    "vertex_ai": lambda request, server: _header(request, "authorization") == f"Bearer {server.access_token}",
    "azure": lambda request, _: (_header(request, "api-key") == FAKE_KEY
                                 and request.query == {"api-version": [AZURE_API_VERSION]}),
    "azure_ai": lambda request, _: _header(request, "api-key") == FAKE_KEY,
}
"""How each cloud signs a request; every other host sends its key as a bearer token."""


def _bearer_key(request: Recorded, server: VendorRecorder) -> bool:
    return _header(request, "authorization") == f"Bearer {FAKE_KEY}"


def _check_signed(model: str, request: Recorded, server: VendorRecorder) -> None:
    signed = SIGNED.get(model.split("/", 1)[0], _bearer_key)
    assert signed(request, server), f"{model}: not signed as expected: {request.headers} {request.query}"


def _sigv4_matches(request: Recorded, root: str) -> bool:
    """Recompute the request's SigV4 signature from the fake secret over the recorded method,
    path, signed headers and body bytes."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    headers = {name.lower(): value for name, value in request.headers.items()}
    scheme, _, fields = headers["authorization"].partition(" ")
    parts = dict(field.strip().split("=", 1) for field in fields.split(","))
    assert scheme == "AWS4-HMAC-SHA256", headers["authorization"]
    key_id, _date, region, service, _ = parts["Credential"].split("/")
    assert (key_id, region, service) == (AWS_KEY_ID, AWS_REGION, "bedrock"), parts["Credential"]
    signed = {name: headers[name] for name in parts["SignedHeaders"].split(";") if name != "host"}
    copy = AWSRequest(method=request.method, url=root + request.path, data=request.raw, headers=signed)
    copy.context["timestamp"] = headers["x-amz-date"]
    auth = SigV4Auth(Credentials(AWS_KEY_ID, FAKE_KEY), "bedrock", AWS_REGION)
    return auth.signature(auth.string_to_sign(copy, auth.canonical_request(copy)), copy) == parts["Signature"]


def test_litellm_drops_a_named_tool_choice_on_mistral(served: VendorRecorder) -> None:
    """litellm 1.106's Mistral route maps only string tool choices ("required" becomes "any") and
    drops the OpenAI object naming a function, which Mistral's API accepts: the call is then not
    forced at all. When this fails, litellm sends it: add the named modes back to the matrix."""
    server = served
    server.requests.clear()
    text, calls = _complete("mistral/mistral-large-latest", server, "tool")
    assert "tool_choice" not in server.requests[-1].body and calls == [] and json.loads(text) == ANSWER
    _complete("mistral/mistral-large-latest", server, "tool-required")
    assert server.requests[-1].body["tool_choice"] == "any"


def test_a_finished_stream_leaves_no_response_open_on_any_route(served: VendorRecorder) -> None:
    """The runtime's stream closing (rosetta.runtime.drive) closes every route's HTTP response:
    the Bedrock event stream, Vertex's SSE, and each OpenAI-compatible host's reader."""
    import gc

    import httpx

    gc.collect()
    gc.disable()  # a collection would close what is left open, and hide it
    try:
        for model in ROUTES:
            _complete(model, served, "stream")
        left_open = [str(o.request.url) for o in gc.get_objects() if isinstance(o, httpx.Response) and not o.is_closed]
    finally:
        gc.enable()
    assert left_open == []


# -- the pieces the routes rest on ---------------------------------------------------------------

def test_vertex_gets_its_token_with_a_jwt_the_service_account_key_signed(
        offline: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh credentials file (so no token litellm cached earlier): the grant is a JWT bearer
    assertion signed by the generated key, and the token it returns signs the Vertex call."""
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import padding

    with VendorRecorder(json.dumps(ANSWER)) as server:
        credentials = cloud_env(server, monkeypatch, tmp_path)
        assert json.loads(_complete("vertex_ai/gemini-2.5-pro", server, "run")[0]) == ANSWER
    grant, call = server.requests
    assert grant.path == "/token" and grant.body["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer"
    header, payload, signature = grant.body["assertion"].split(".")
    public_key = serialization.load_pem_public_key(credentials.public_key_pem)
    public_key.verify(_unbase64(signature), f"{header}.{payload}".encode(), padding.PKCS1v15(), hashes.SHA256())
    assert json.loads(_unbase64(header))["alg"] == "RS256"
    claims = json.loads(_unbase64(payload))
    assert claims["iss"] == credentials.client_email
    assert "https://www.googleapis.com/auth/cloud-platform" in claims["scope"].split()
    assert _header(call, "authorization") == f"Bearer {server.access_token}"


def _unbase64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@pytest.mark.parametrize("form", [{"grant_type": "refresh_token", "assertion": "a.b.c"},
                                  {"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer", "assertion": "x"}])
def test_the_token_endpoint_refuses_what_is_not_a_jwt_bearer_grant(offline: None, form: dict[str, str]) -> None:
    import urllib.error
    import urllib.parse
    import urllib.request

    with VendorRecorder() as server:
        data = urllib.parse.urlencode(form).encode()
        request = urllib.request.Request(server.token_uri, data=data, method="POST")  # form-encoded by default
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=5)
    assert refused.value.code == 400 and json.loads(refused.value.read())["error"] == "invalid_grant"
    assert server.requests[0].body == form


def test_event_stream_frames_decode_with_botocore() -> None:
    """The frames Bedrock's streamed answers are made of, read back by botocore's own parser
    (the one litellm uses), split at an arbitrary byte as a socket may split them."""
    from botocore.eventstream import EventStreamBuffer

    payloads = [("messageStart", {"role": "assistant"}),
                ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "é" * 300}})]
    data = b"".join(event_stream_frame(name, payload) for name, payload in payloads)
    buffer = EventStreamBuffer()
    buffer.add_data(data[:37])
    assert list(buffer) == []
    buffer.add_data(data[37:])
    decoded = [(m.headers, json.loads(m.payload)) for m in buffer]
    assert decoded == [({":event-type": name, ":content-type": "application/json", ":message-type": "event"}, payload)
                       for name, payload in payloads]


def test_api_base_for_names_the_known_providers() -> None:
    with VendorRecorder() as server:
        with pytest.raises(ValueError, match="no recorder route for provider `cohere`.*bedrock"):
            api_base_for("cohere/command-r", server)
        assert api_base_for("bedrock/us.amazon.nova-pro-v1:0", server) == server.root
