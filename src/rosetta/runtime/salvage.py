"""litellm's completion calls, keeping replies litellm cannot convert: a 200 whose body is not
valid UTF-8, or whose message content is a list of parts (``[{"type": "text", "text": ...}]``, as
some OpenAI-compatible servers answer), makes litellm raise after the reply arrived and was paid
for. Retried as a provider failure, such a reply costs a call per attempt and its text never
reaches the Result or ``record_dir``; read here instead, it is an answer like any other.

The reply is taken from what litellm logs of the call (``logger_fn`` sees the provider's body
before litellm converts it) or, for a body that is not UTF-8, from the decoding error itself; bytes
that are not UTF-8 become U+FFFD, and the attempt says how many (:func:`note`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

NOTE = "rosetta_note"
"""The key of ``response._hidden_params`` (litellm's per-response metadata) holding what was repaired."""

TEXT_PARTS = ("text", "output_text")
"""Content part types that carry the answer's text (Chat Completions, Responses)."""

Complete = Callable[..., Any]
"""A completion function, called with litellm's keywords: :func:`completion` (the default), or a test's stand-in."""
AComplete = Callable[..., Coroutine[Any, Any, Any]]
"""An asynchronous one, :func:`acompletion` or a stand-in: a coroutine function (its calls may run on another loop)."""


def completion(**kwargs: Any) -> Any:
    """``litellm.completion(**kwargs)``, or the reply it could not convert."""
    from rosetta.local.litellm_offline import import_litellm
    from rosetta.third_party import using_litellm

    seen: dict[str, Any] = {}
    keeper = _keeper(seen, kwargs.pop("logger_fn", None))
    try:
        with using_litellm():
            return import_litellm().completion(**kwargs, logger_fn=keeper)
    except Exception as error:
        response = salvaged(error, seen.get("body"))
        if response is None:
            raise
        return response


async def acompletion(**kwargs: Any) -> Any:
    """:func:`completion` for asyncio (``litellm.acompletion``)."""
    from rosetta.local.litellm_offline import import_litellm
    from rosetta.third_party import using_litellm

    seen: dict[str, Any] = {}
    keeper = _keeper(seen, kwargs.pop("logger_fn", None))
    try:
        with using_litellm():
            return await import_litellm().acompletion(**kwargs, logger_fn=keeper)
    except Exception as error:
        response = salvaged(error, seen.get("body"))
        if response is None:
            raise
        return response


def note(response: object) -> str | None:
    """What was repaired to read ``response`` (None for a reply litellm converted itself)."""
    hidden = getattr(response, "_hidden_params", None)
    return hidden.get(NOTE) if isinstance(hidden, Mapping) else None


def salvaged(error: BaseException, body: object) -> Any:
    """The chat completion ``error`` lost, as litellm's ``ModelResponse``: from ``body`` (what
    litellm logged before it failed) or from an undecodable body in the error's chain; None when
    no completion arrived (a timeout, an error status, a body that is not a completion)."""
    repaired = None
    undecodable = _undecodable(error)
    if undecodable is not None:
        text = undecodable.decode("utf-8", errors="replace")
        replaced = text.count("\ufffd") - undecodable.count("\ufffd".encode())
        body = text
        repaired = (f"the reply was not valid UTF-8: {replaced} invalid byte sequence"
                    f"{'s' if replaced != 1 else ''} read as U+FFFD")
    if isinstance(body, (str, bytes)):
        try:
            body = json.loads(body)
        except ValueError:
            return None
    if not isinstance(body, Mapping) or not isinstance(body.get("choices"), list) or not body["choices"]:
        return None
    from rosetta.local.litellm_offline import import_litellm

    try:
        response = import_litellm().ModelResponse(**_text_content(body))
    except Exception:  # noqa: BLE001 (not a completion after all: the original error stands)
        return None
    if repaired is not None:
        response._hidden_params[NOTE] = repaired
    return response


def _keeper(seen: dict[str, Any], theirs: Callable[[dict[str, Any]], None] | None) -> Callable[[dict[str, Any]], None]:
    """A ``logger_fn`` keeping the provider's reply (litellm calls it before and after the request;
    the first details with ``original_response`` hold it), then calling the caller's own, if any."""
    def keep(details: dict[str, Any]) -> None:
        if "original_response" in details:  # the error's text replaces it if the conversion fails
            seen.setdefault("body", details["original_response"])
        if theirs is not None:
            theirs(details)
    return keep


def _undecodable(error: BaseException) -> bytes | None:
    """The body of a ``UnicodeDecodeError`` in ``error``'s chain (the SDK decodes the whole body at once)."""
    seen: set[int] = set()
    link: BaseException | None = error
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        if isinstance(link, UnicodeDecodeError) and isinstance(link.object, bytes):
            return link.object
        link = link.__cause__ or link.__context__
    return None


def _text_content(body: Mapping[str, Any]) -> dict[str, Any]:
    """``body`` with each message's list of content parts joined into its text (other parts, such
    as images, dropped; a refusal part kept as the message's ``refusal``)."""
    choices = []
    for choice in body["choices"]:
        message = choice.get("message") if isinstance(choice, Mapping) else None
        if isinstance(message, Mapping) and isinstance(message.get("content"), list):
            parts = [part for part in message["content"] if isinstance(part, Mapping)]
            text = "".join(str(part.get("text") or "") for part in parts if part.get("type") in TEXT_PARTS)
            refusal = next((part.get("refusal") for part in parts if part.get("type") == "refusal"), None)
            message = {**message, "content": text or None}
            if refusal and not message.get("refusal"):
                message["refusal"] = refusal
            choice = {**choice, "message": message}
        choices.append(choice)
    return {**body, "choices": choices}
