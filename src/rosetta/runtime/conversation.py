"""Multi-turn conversations: history plus provider state, on one model, saved as JSON.

The first turn runs like :meth:`Agent.run` (its fallback chain included); the model that answers
it is kept for every later turn, because a conversation's history was written for that model's
prompt. Later turns send the history as it was sent, plus the new user turn; a failed turn leaves
the conversation as it was, so it can be retried. ``to_json`` / :meth:`Conversation.resume`
carry everything needed to continue in another process.

With ``record_dir`` every turn leaves three readable files there, as the engine of ADR-0009 did:
``turn-NNN-prompt.md`` (written before the call), ``turn-NNN-response.md`` (the raw answer) and
``turn-NNN-conversation.json`` (:meth:`Conversation.to_json` after the turn; ``conversation.json``
is the latest). Every export, those files and :meth:`~Conversation.to_json` /
:meth:`~Conversation.save` alike, has its credentials redacted, inputs included, unless the
conversation was started with ``raw_transcripts=True`` (a conversation resumed from a redacted save
goes on with the redacted history; in this process the next turn still sends the exact one).

Whatever text a model returns is recorded. UTF-8 cannot encode a lone surrogate (a model may send
``"\\ud800"``), so one is written as its JSON escape ``\\ud800``: in the JSON files that is JSON's
own escape, read back to the same string by any JSON reader; in the ``.md`` files it is the same six
characters, and the turn's JSON file holds the exact text.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol

from rosetta.errors import Location, Problem, UsageError
from rosetta.fileio import encodable
from rosetta.runtime.options import RunOptions, refuse_set
from rosetta.runtime.result import OutputT
from rosetta.runtime.secrets import redact, redact_data
from rosetta.runtime.stream import AsyncTextRun, Stream, TextRun
from rosetta.runtime.tools import ToolCall, assistant_turn, pending_calls, result_turns

if TYPE_CHECKING:
    from rosetta.render.prompt import RenderedPrompt
    from rosetta.runtime.result import Result
    from rosetta.runtime.runner import Runner
    from rosetta.runtime.salvage import AComplete, Complete

FORMAT = 1
"""Version of the saved JSON; bumped when its shape changes."""


class ConversingAgent(Protocol[OutputT]):
    """What a conversation needs of its agent (:class:`~rosetta.runtime.agent.Agent` is one): its
    runner, its prompts and model chain, and its reviews. A protocol, so this module never imports
    the facade that creates conversations."""

    name: str
    runner: Runner

    def model_chain(self) -> list[str]: ...

    def prompt_for(self, model: str, *, strict: bool | None = None, user_id: object | None = None) -> RenderedPrompt: ...

    def check_review(self, options: RunOptions) -> None: ...

    def reviewed(self, result: Result[OutputT], inputs: Mapping[str, Any], options: RunOptions, *,
                 messages: list[dict[str, Any]] | None = None, complete: Complete | None = None) -> Result[OutputT]: ...

    async def areviewed(self, result: Result[OutputT], inputs: Mapping[str, Any], options: RunOptions, *,
                        messages: list[dict[str, Any]] | None = None,
                        acomplete: AComplete | None = None) -> Result[OutputT]: ...


class Conversation(Generic[OutputT]):
    """Turns with one agent, pinned to the model that answered the first one; each turn's Result is
    typed as the agent's."""

    def __init__(self, agent: ConversingAgent[OutputT], model: str | None = None, options: RunOptions | None = None) -> None:
        self.agent = agent
        self.options = options or RunOptions()  # every turn's; a turn's own replace them for that turn
        self.user_id = self.options.user_id  # keeps every turn on this user's experiment arm
        self.model = model  # requested; after the first turn, the model that answered
        self.fallbacks = list(self.options.fallbacks) if self.options.fallbacks is not None else None
        self.record_dir = Path(self.options.record_dir) if self.options.record_dir is not None else None
        self.raw_transcripts = self.options.raw_transcripts  # record_dir files as sent, credentials included
        self.artifact = ""
        self.messages: list[dict[str, Any]] = []  # exactly what the model has seen and said
        self.state: dict[str, Any] = {}  # the provider's latest state (response id, thinking, signatures)
        self.turns: list[dict[str, Any]] = []

    def __repr__(self) -> str:
        return f"Conversation({self.agent.name!r}, model={self.model!r}, turns={len(self.turns)})"

    @property
    def pinned(self) -> bool:
        """True once a turn has been answered: the model no longer changes."""
        return bool(self.turns)

    # -- turns -------------------------------------------------------------------------------

    def send(self, message: Mapping[str, Any] | str, options: RunOptions | None = None, *,
             complete: Complete | None = None, **keywords: Any) -> Result[OutputT]:
        """Take one turn: ``message`` is the agent's inputs, or (after the first turn) free text too.
        ``options`` / keywords replace the conversation's own for this turn (see
        :class:`~rosetta.runtime.options.RunOptions`)."""
        opts = self._options(options, keywords)
        inputs, chain, messages = self._prepare(message)
        self._record_prompt(chain[0], inputs, messages)
        result = self.agent.runner.run(inputs, chain, opts, complete=complete, messages=messages)
        result = self.agent.reviewed(result, inputs, opts, messages=messages, complete=complete)
        return self._commit(message, inputs, messages, result)

    async def asend(self, message: Mapping[str, Any] | str, options: RunOptions | None = None, *,
                    acomplete: AComplete | None = None, **keywords: Any) -> Result[OutputT]:
        """:meth:`send` for asyncio."""
        opts = self._options(options, keywords)
        inputs, chain, messages = self._prepare(message)
        self._record_prompt(chain[0], inputs, messages)
        result = await self.agent.runner.arun(inputs, chain, opts, acomplete=acomplete, messages=messages)
        result = await self.agent.areviewed(result, inputs, opts, messages=messages, acomplete=acomplete)
        return self._commit(message, inputs, messages, result)

    def stream(self, message: Mapping[str, Any] | str, options: RunOptions | None = None, *,
               complete: Complete | None = None, acomplete: AComplete | None = None,
               **keywords: Any) -> Stream[OutputT]:
        """:meth:`send`, streamed: a :class:`~rosetta.runtime.stream.Stream` whose Result is this turn's
        (recorded and added to the conversation once the stream has ended)."""
        opts = self._options(options, keywords)
        inputs, chain, messages = self._prepare(message)
        runner = self.agent.runner

        def start() -> TextRun:
            self._record_prompt(chain[0], inputs, messages)
            return runner.text(inputs, chain, opts, complete=complete, messages=messages)

        def astart() -> AsyncTextRun:
            self._record_prompt(chain[0], inputs, messages)
            return runner.atext(inputs, chain, opts, acomplete=acomplete, messages=messages)

        def finish(result: Result[OutputT]) -> Result[OutputT]:
            reviewed = self.agent.reviewed(result, inputs, opts, messages=messages, complete=complete)
            return self._commit(message, inputs, messages, reviewed)

        async def afinish(result: Result[OutputT]) -> Result[OutputT]:
            reviewed = await self.agent.areviewed(result, inputs, opts, messages=messages, acomplete=acomplete)
            return self._commit(message, inputs, messages, reviewed)

        return Stream(start, astart, finish, afinish)

    def send_tool_results(self, results: Mapping[str, Any], options: RunOptions | None = None, *,
                          complete: Complete | None = None, **keywords: Any) -> Result[OutputT]:
        """Answer the tool calls the last turn ended with (``Result.wants_tools``): ``results`` maps
        each call's id to what its tool returned (text, or anything JSON can write; an exception
        is sent as that call's error), and the model goes on from there, as a turn of its own."""
        opts = self._options(options, keywords)
        messages = self._tool_results(results)
        assert self.model is not None
        self._record_prompt(self.model, {}, messages)
        result = self.agent.runner.run({}, [self.model], opts, complete=complete, messages=messages)
        return self._commit({"tool_results": dict(results)}, {}, messages, result)

    async def asend_tool_results(self, results: Mapping[str, Any], options: RunOptions | None = None, *,
                                 acomplete: AComplete | None = None, **keywords: Any) -> Result[OutputT]:
        """:meth:`send_tool_results` for asyncio."""
        opts = self._options(options, keywords)
        messages = self._tool_results(results)
        assert self.model is not None
        self._record_prompt(self.model, {}, messages)
        result = await self.agent.runner.arun({}, [self.model], opts, acomplete=acomplete, messages=messages)
        return self._commit({"tool_results": dict(results)}, {}, messages, result)

    def _tool_results(self, results: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The history plus one ``tool`` message per call the last turn asked for; a UsageError when
        no call is waiting, an id is not one of them, or one of them has no result."""
        waiting = [call["id"] for call in self.messages[-1].get("tool_calls") or []] if self.messages else []
        if not waiting:
            raise UsageError(Problem("no tool call is waiting for a result: the last turn did not end with one",
                                     field="results", hint="send_tool_results follows a turn whose Result.wants_tools"))
        if not isinstance(results, Mapping) or set(results) != set(waiting):
            given = sorted(map(str, results)) if isinstance(results, Mapping) else type(results).__name__
            raise UsageError(Problem(f"results must answer exactly the waiting calls, by id: {', '.join(waiting)}",
                                     field="results", expected=", ".join(waiting), hint=f"got {given}"))
        names = {call["id"]: call["function"]["name"] for call in self.messages[-1]["tool_calls"]}
        calls = [ToolCall(key, names[key], None, None if isinstance(value, BaseException) else value,
                          f"the tool raised {type(value).__name__}: {value}" if isinstance(value, BaseException)
                          else None, True) for key, value in ((key, results[key]) for key in waiting)]
        return [*self.messages, *result_turns(calls)]

    def _options(self, options: RunOptions | None, keywords: Mapping[str, Any]) -> RunOptions:
        """A turn's options: the conversation's, replaced by the turn's own; the turn's model chain,
        arm and recording stay the conversation's."""
        opts = RunOptions.of(options or self.options, keywords)
        refuse_set(opts, ("fallbacks", "user_id", "record_dir", "raw_transcripts"), "a conversation's turn",
                   "{name} belongs to the whole conversation: pass it to agent.chat({name}=...)", allowed=self.options)
        self.agent.check_review(opts)
        return replace(opts, fallbacks=self.options.fallbacks, user_id=self.options.user_id,
                       record_dir=self.options.record_dir, raw_transcripts=self.options.raw_transcripts)

    def _prepare(self, message: Mapping[str, Any] | str,
                 ) -> tuple[dict[str, Any], list[str], list[dict[str, Any]] | None]:
        agent = self.agent
        if not self.pinned:
            inputs = self._first_inputs(message)
            return inputs, agent.runner.chain(inputs, self.model, self.fallbacks), None
        spec, model = agent.runner.spec, self.model
        assert model is not None  # a pinned conversation has answered on one
        prompt = agent.prompt_for(model, user_id=self.user_id)
        if isinstance(message, str):
            from rosetta.runtime.guardrails import check_message

            if spec is not None:
                check_message(spec.guardrails.input_validation, message, agent.name, source=agent.runner.source)
            text = message
        else:
            agent.runner.check_inputs(message)  # the input rules, before any token is spent
            text = prompt.user_message(message)
        return {}, [model], [*self.messages, {"role": "user", "content": text}]

    def _first_inputs(self, message: Mapping[str, Any] | str) -> dict[str, Any]:
        if not isinstance(message, str):
            return dict(message)
        chain = [self.model] if self.model else self.agent.model_chain()
        names = [field.name for field in self.agent.prompt_for(chain[0]).inputs] if chain else []
        if len(names) != 1:
            raise UsageError(Problem(f"{self.agent.name} takes {len(names)} inputs ({', '.join(names)}); the first "
                                     "turn needs them by name", field="message",
                                     hint="send({'name': value, ...}); free text works from the second turn"))
        return {names[0]: message}

    def _commit(self, message: Mapping[str, Any] | str, inputs: dict[str, Any], messages: list[dict[str, Any]] | None,
                result: Result[OutputT]) -> Result[OutputT]:
        if messages is None:  # first turn: what the answering model was sent
            self.model = result.model
            self.artifact = result.artifact
            messages = self.agent.prompt_for(result.model, user_id=self.user_id).messages(inputs)
            self._record_prompt(result.model, inputs, None)  # a fallback model was sent its own prompt
        reply: dict[str, Any] = {"role": "assistant", "content": result.raw}
        if result.wants_tools:  # the calls the caller answers with send_tool_results
            reply = assistant_turn(result.raw, [ToolCall(call["id"], call["name"], call["arguments"])
                                                for call in pending_calls(result)])
        for name in ("thinking_blocks", "provider_specific_fields"):  # litellm passes these back
            if name in result.state:
                reply[name] = result.state[name]
        self.messages = [*messages, *result.tool_messages, reply]
        self.state = dict(result.state)
        self.turns.append({
            "message": message if isinstance(message, str) else dict(message), "model": result.model,
            "artifact": result.artifact, "raw": result.raw, "data": result.data, "valid": result.valid,
            "issues": [f"{i.path}: {i.message}" for i in result.issues],
            "attempts": [{"model": a.model, "outcome": a.outcome, "error": a.error, "latency_s": round(a.latency_s, 4)}
                         for a in result.attempts],
            "usage": dict(result.usage), "cost": result.cost, "latency_s": round(result.latency_s, 4),
        })
        self._record_answer(result)
        return result

    # -- saving and resuming -----------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {"rosetta_conversation": FORMAT, "agent": self.agent.name, "model": self.model,
                "fallbacks": self.fallbacks, "artifact": self.artifact, "user_id": self.user_id,
                "messages": self.messages, "state": self.state, "turns": self.turns}

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON, credentials redacted string by string (unless the conversation
        keeps ``raw_transcripts``), and every character UTF-8 can write (see :func:`encodable`)."""
        data = json.loads(json.dumps(self.to_dict(), default=str))  # JSON types only, as a reader gets them
        if not self.raw_transcripts:
            data = redact_data(data)
        return encodable(json.dumps(data, indent=2, ensure_ascii=False) + "\n")

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write :meth:`to_json` atomically; returns the path."""
        from rosetta.fileio import write_atomic

        write_atomic(path, self.to_json())
        return Path(path)

    @classmethod
    def resume(cls, agent: ConversingAgent[OutputT], saved: str | os.PathLike[str] | Mapping[str, Any],
               options: RunOptions | None = None) -> Conversation[OutputT]:
        """A conversation continued from :meth:`save`'s file or :meth:`to_dict`'s data; its saved
        fallbacks and experiment arm replace those of ``options``."""
        where = None if isinstance(saved, Mapping) else str(saved)
        data = saved if isinstance(saved, Mapping) else _read_json(Path(saved))
        if not isinstance(data, Mapping) or data.get("rosetta_conversation") != FORMAT:
            raise UsageError(Problem("not a saved rosetta conversation (format 1)", Location(where),
                                     hint="pass a file written by Conversation.save or record_dir"))
        if data.get("agent") != agent.name:
            raise UsageError(Problem(f"this conversation is with {data.get('agent')!r}, not {agent.name!r}",
                                     Location(where), field="agent", hint=f"rosetta.load({data.get('agent')!r})"))
        try:
            conversation = cls(agent, data["model"], replace(options or RunOptions(), fallbacks=data.get("fallbacks"),
                                                             user_id=data.get("user_id")))
            conversation.artifact = str(data.get("artifact") or "")
            conversation.messages = [dict(m) for m in data["messages"]]
            conversation.state = dict(data.get("state") or {})
            conversation.turns = [dict(t) for t in data["turns"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise UsageError(Problem(f"damaged conversation: {exc}", Location(where),
                                     hint="the file must hold model, messages and turns")) from None
        return conversation

    # -- recording ---------------------------------------------------------------------------

    def _record_prompt(self, model: str, inputs: Mapping[str, Any], messages: list[dict[str, Any]] | None) -> None:
        if self.record_dir is None:
            return
        from rosetta.fileio import write_atomic

        prompt = self.agent.prompt_for(model, user_id=self.user_id)
        text = prompt.render_for_display(inputs) if messages is None else _readable(messages, prompt)
        write_atomic(self._record_path("prompt.md"), encodable(text if self.raw_transcripts else redact(text)))

    def _record_answer(self, result: Result[OutputT]) -> None:
        if self.record_dir is None:
            return
        from rosetta.fileio import write_atomic

        number = len(self.turns)
        raw = result.raw if self.raw_transcripts else redact(result.raw)
        write_atomic(self._record_path("response.md", number),
                     encodable(raw if raw.endswith("\n") else raw + "\n"))
        text = self.to_json()
        write_atomic(self._record_path("conversation.json", number), text)
        write_atomic(self.record_dir / "conversation.json", text)

    def _record_path(self, kind: str, number: int | None = None) -> Path:
        assert self.record_dir is not None
        self.record_dir.mkdir(parents=True, exist_ok=True)
        return self.record_dir / f"turn-{(number or len(self.turns) + 1):03d}-{kind}"


def _readable(messages: list[dict[str, Any]], prompt: RenderedPrompt) -> str:
    """A conversation as one text block: each message under its role, then the output instructions."""
    parts = [f"=== {str(m['role']).upper()} ===\n{m.get('content') or ''}"
             + "".join(f"\n[calls {call['function']['name']} ({call['id']}) with {call['function']['arguments']}]"
                       for call in m.get("tool_calls") or [])
             + (f" [result of {m['tool_call_id']}]" if m.get("role") == "tool" else "") for m in messages]
    if prompt.output_schema is not None:
        parts.append("=== OUTPUT INSTRUCTIONS ===\nAnswer with one JSON object valid against this schema:\n"
                     + json.dumps(prompt.output_schema, indent=2))
    return "\n\n".join(parts) + "\n"


def _read_json(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(Problem(f"cannot read the conversation: {exc.strerror}", Location(str(path)))) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(Problem(f"not valid JSON: {exc}", Location(str(path)),
                                 hint="pass a file written by Conversation.save or record_dir")) from None
