"""One options object, every call path: ``run``, ``arun``, ``stream`` (read with ``for`` and with
``async for``), ``chat().send`` and ``run_manual`` take the same :class:`rosetta.RunOptions` and do
the same with it — the same requests, the same Result — and an option no path knows is refused
before anything is sent. Against the deterministic scripted model (tests/scripted_model.py): the
toy agent answers ``alpha``; the scripted judge fails "The label is gamma" for it, and the toy
model answers ``gamma`` once the reviewer's critique names that criterion."""

from __future__ import annotations

import asyncio
import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import scripted_model
from conftest import REPO
from scripted_model import write_toy_project

from rosetta import Result, RunOptions, Stream, UsageError, load
from rosetta.third_party import import_litellm
from rosetta.runtime.health import ProviderHealth
from rosetta.runtime.result import RetryPolicy
from rosetta.runtime.limits import RateLimiter
from rosetta.runtime.options import OPTION_NAMES

litellm = import_litellm()  # offline: the bundled model map

MODEL = "scripted/toy"
NOTE = {"text": "a note about apples"}
PATHS = ("run", "arun", "stream", "astream", "send", "manual")


class CountingHealth(ProviderHealth):
    def __init__(self) -> None:
        super().__init__()
        self.recorded: list[bool] = []

    def record(self, key: str, failed: bool, started: float | None = None) -> None:
        self.recorded.append(failed)
        super().record(key, failed, started)


class CountingLimiter(RateLimiter):
    def __init__(self) -> None:
        super().__init__()
        self.reserved = 0

    def reserve(self, kwargs, prompt_tokens):  # type: ignore[no-untyped-def]
        self.reserved += 1
        return super().reserve(kwargs, prompt_tokens)


@pytest.fixture(autouse=True)
def scripted() -> None:
    scripted_model.register()


@pytest.fixture
def toy(tmp_path: Path):
    write_toy_project(tmp_path)
    shutil.copy(REPO / "signatures/rubric-reviewer.md", tmp_path / "signatures/rubric-reviewer.md")
    return load("toy-sorter", project=tmp_path)


def every_option(record_dir: Path) -> RunOptions:
    """Every field of RunOptions set to something other than its default."""
    options = RunOptions(
        fallbacks=[], policy=RetryPolicy(attempts=2, base=0.01, cap=0.05, timeout=30.0), timeout=7.5,
        validation_retries=2, retry_temperature=0.1, on_secret="fail", review=["The label is gamma"], retry_once=True,
        review_model="scripted/judge", record_dir=record_dir, raw_transcripts=True, user_id="user-7",
        api_base="http://127.0.0.1:9/v1", api_key="sk-test-not-a-real-key", extra={"user": "end-user-7"},
        overrides={"temperature": 0.3}, limiter=CountingLimiter(), health=CountingHealth(),
        tools={}, max_tool_steps=5, max_tool_errors=1)  # the toy agent declares no tool: tests/runtime/test_tool_loop.py
    unset = [f for f in OPTION_NAMES if getattr(options, f) == getattr(RunOptions(), f)]
    assert not unset, f"the table leaves {unset} at their defaults"
    return options


def call(agent, how: str, options: RunOptions, tmp_path: Path) -> tuple[Result, list[dict], list[str]]:
    """Run ``agent`` one way with ``options``; returns the Result, every request body (the answering
    model's and the judge's) and the text streamed, if any."""
    bodies: list[dict] = []

    def complete(**kwargs):
        bodies.append(kwargs)
        return litellm.completion(**kwargs)

    async def acomplete(**kwargs):
        bodies.append(kwargs)
        return await litellm.acompletion(**kwargs)

    text: list[str] = []
    if how == "run":
        result = agent.run(NOTE, MODEL, options, complete=complete)
    elif how == "arun":
        result = asyncio.run(agent.arun(NOTE, MODEL, options, acomplete=acomplete))
    elif how == "stream":
        stream = agent.stream(NOTE, MODEL, options, complete=complete)
        assert isinstance(stream, Stream) and not bodies  # nothing is sent before the first read
        text = list(stream)
        result = stream.result()
    elif how == "astream":
        async def read() -> Result:
            stream = agent.stream(NOTE, MODEL, options, acomplete=acomplete)
            text.extend([piece async for piece in stream])
            return await stream.aresult()

        result = asyncio.run(read())
    elif how == "send":
        result = agent.chat(MODEL, options).send(NOTE, complete=complete)
    else:  # a person pastes the answer the model would have given; what only a call uses is refused
        manual = replace(options, retry_once=False, extra={}, overrides={}, tools=None, record_dir=None,
                         raw_transcripts=False)  # (test_options_a_path_would_ignore_are_refused)
        result = agent.run_manual(NOTE, manual, model=MODEL, complete=complete,
                                  answer=json.dumps({"label": "alpha"}), prompt_file=tmp_path / "manual-prompt.md")
    return result, bodies, text


def answering(bodies: list[dict]) -> list[dict]:
    """The answering model's requests, as a plain run sends them (a stream's first adds ``stream``)."""
    return [{k: v for k, v in body.items() if k != "stream"} for body in bodies if body["model"] == MODEL]


@pytest.mark.parametrize("recorded", [True, False], ids=["recorded", "unrecorded"])
def test_every_option_has_the_same_effect_on_every_path(toy, tmp_path: Path, recorded: bool) -> None:
    seen = {}
    for how in PATHS:
        options = every_option(tmp_path / f"record-{how}")
        if not recorded:  # a run with a record_dir is a one-turn conversation: the other way is checked too
            options = replace(options, record_dir=None)
        result, bodies, text = call(toy, how, options, tmp_path)
        seen[how] = result, bodies
        leaked = [sorted(set(body) & (OPTION_NAMES - {"api_base", "api_key", "timeout"})) for body in bodies]
        assert not any(leaked), f"{how}: rosetta options in a request body: {leaked}"
        judged = [body for body in bodies if body["model"] == "scripted/judge"]
        if how == "manual":
            assert result.model == "manual" and result.data == {"label": "alpha"} and not answering(bodies)
            assert len(judged) == 1 and result.review.verdict == "fail" and not result.retried
            continue
        assert len(judged) == 2, f"{how}: the first answer and the retried one are reviewed"
        assert all(body["user"] == "end-user-7" and body["api_key"] == "sk-test-not-a-real-key"
                   and body["timeout"] == 7.5 for body in answering(bodies)), how
        assert options.health.recorded == [False, False] and options.limiter.reserved == 2, how  # not the project's
        assert result.data == {"label": "gamma"} and result.retried and result.first_review.verdict == "fail"
        assert result.review.verdict == "pass" and result.overrides == {"temperature": 0.3}
        assert [a.outcome for a in result.attempts] == ["ok", "ok"]
        assert all(body["temperature"] == 0.3 for body in answering(bodies))
        if recorded:
            records = sorted(p.name for p in (tmp_path / f"record-{how}").iterdir())
            assert records == ["conversation.json", "turn-001-conversation.json", "turn-001-prompt.md",
                               "turn-001-response.md"], how
            saved = json.loads((tmp_path / f"record-{how}" / "conversation.json").read_text())
            assert saved["user_id"] == "user-7" and saved["turns"][0]["data"] == {"label": "gamma"}
        else:
            assert not (tmp_path / f"record-{how}").exists()
        if how in ("stream", "astream"):
            assert bodies[0].get("stream") is True and "".join(text) == json.dumps({"label": "alpha"})
    run_result, run_bodies = seen["run"]
    for how in PATHS[1:-1]:
        result, bodies = seen[how]
        assert answering(bodies) == answering(run_bodies), f"{how} sent other requests than run"
        for name in ("raw", "data", "model", "artifact", "version", "arm", "experiment", "agent", "retried",
                     "overrides", "usage", "issues"):
            assert getattr(result, name) == getattr(run_result, name), f"{how}: Result.{name} differs from run's"


@pytest.mark.parametrize("how", PATHS)
def test_an_unknown_option_is_refused_before_any_request(toy, tmp_path: Path, how: str) -> None:
    for typo, hint in (("reveiw", "did you mean review="), ("temperature", "extra={'temperature'"),
                       ("mock_response", "extra={'mock_response'"), ("temprature", "extra={'temperature'")):
        with pytest.raises(UsageError, match=hint) as caught:
            if how == "send":
                toy.chat(MODEL).send(NOTE, complete=_forbidden, **{typo: 1})
            elif how == "manual":
                toy.run_manual(NOTE, answer="{}", prompt_file=tmp_path / "p.md", **{typo: 1})
            elif how == "arun":
                asyncio.run(toy.arun(NOTE, MODEL, acomplete=_forbidden, **{typo: 1}))
            else:
                toy.run(NOTE, MODEL, complete=_forbidden, **{typo: 1}) if how == "run" else \
                    toy.stream(NOTE, MODEL, complete=_forbidden, **{typo: 1})
        assert "nothing was sent" in str(caught.value)
    assert not (tmp_path / "p.md").exists()
    if how == "manual":
        with pytest.raises(UsageError, match="a pasted answer has none"):
            toy.run_manual(NOTE, answer="{}", prompt_file=tmp_path / "p.md", review=["x"], retry_once=True)
        assert not (tmp_path / "p.md").exists()


@pytest.mark.parametrize("how", PATHS)
def test_an_option_of_the_wrong_type_is_a_usage_error_on_every_path(toy, tmp_path: Path, how: str) -> None:
    """Issue 83, item 11: ``review=12345`` raised TypeError and ``policy="fast"`` AttributeError."""
    for option, message in (({"review": 12345}, "a rubric cannot be read from int"),
                            ({"policy": "fast"}, "option policy: 'fast' is not valid")):
        with pytest.raises(UsageError, match=message):
            if how == "send":
                toy.chat(MODEL).send(NOTE, complete=_forbidden, **option)
            elif how == "manual":
                toy.run_manual(NOTE, answer="{}", prompt_file=tmp_path / "p.md", **option)
            elif how == "arun":
                asyncio.run(toy.arun(NOTE, MODEL, acomplete=_forbidden, **option))
            else:
                toy.run(NOTE, MODEL, complete=_forbidden, **option) if how == "run" else \
                    toy.stream(NOTE, MODEL, complete=_forbidden, **option)
    assert not (tmp_path / "p.md").exists()


def test_options_a_path_would_ignore_are_refused(toy, tmp_path: Path) -> None:
    """Issue 83, item 11: a conversation's turn ignored fallbacks and recording, manual mode a
    provider parameter, run_prompt recording; each now says so before anything is sent."""
    chat = toy.chat(MODEL, record_dir=tmp_path / "chat")
    for option in ({"fallbacks": ["openai/gpt-4o"]}, {"record_dir": tmp_path / "elsewhere"}, {"raw_transcripts": True},
                   {"user_id": "u1"}):
        with pytest.raises(UsageError, match=f"pass it to agent.chat\\({next(iter(option))}="):
            chat.send(NOTE, complete=_forbidden, **option)
        with pytest.raises(UsageError, match="belongs to the whole conversation"):
            asyncio.run(chat.asend(NOTE, acomplete=_forbidden, **option))
    chat.send(NOTE, record_dir=tmp_path / "chat")  # the conversation's own value is no change
    for option in ({"extra": {"max_tokens": 5}}, {"record_dir": tmp_path / "r"}, {"overrides": {"temperature": 0}}):
        with pytest.raises(UsageError, match="manual mode does not use the option"):
            toy.run_manual(NOTE, answer="{}", prompt_file=tmp_path / "p.md", **option)
    assert not (tmp_path / "p.md").exists()
    with pytest.raises(UsageError) as caught:  # the hint names the inputs, not a keyword the call refuses
        toy.run({}, MODEL, complete=_forbidden)
    assert "missing value for input(s) text" in str(caught.value)
    assert "give it in the inputs: {'text': ...} (`rosetta run`: -i text=...)" in str(caught.value)
    prompt = toy.prompt_for(MODEL)
    for option in ({"record_dir": tmp_path / "r"}, {"fallbacks": ["openai/gpt-4o"]}):
        with pytest.raises(UsageError, match="run_prompt does not use the option"):
            toy.run_prompt(prompt, NOTE, complete=_forbidden, **option)
    assert not (tmp_path / "r").exists()


def _forbidden(**kwargs):
    raise AssertionError("a request was sent")


def test_compiled_parameters_change_only_through_overrides(toy) -> None:
    with pytest.raises(UsageError, match=r"(?s)temperature is set by the compiled prompt .*overrides=\{'temperature'"):
        toy.run(NOTE, MODEL, extra={"temperature": 0.9}, complete=_forbidden)
    for bad, message in (({"model": "x"}, "extra cannot set 'model'"), ({"review": []}, "is a rosetta option"),
                         ({"api_key": "k"}, "use the option of that name")):
        with pytest.raises(UsageError, match=message):
            RunOptions(extra=bad)
    plain = toy.run(NOTE, MODEL)
    assert plain.overrides == {}
    with pytest.raises(UsageError, match="retry_once needs a rubric"):
        RunOptions(retry_once=True)
    with pytest.raises(UsageError, match="validation_retries"):
        RunOptions(validation_retries=-1)
    with pytest.raises(UsageError, match="the rubric has no criteria"):
        toy.run(NOTE, MODEL, review=[], complete=_forbidden)  # refused before the answer is paid for
    assert "sk-secret" not in repr(RunOptions(api_key="sk-secret"))
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    shown = repr(RunOptions(extra={"extra_headers": {"Authorization": f"Bearer {token}"}}))
    assert token not in shown and "extra_headers" in shown
    with pytest.raises(UsageError) as caught:
        RunOptions(extra=[token])  # type: ignore[arg-type]
    assert token not in str(caught.value)


def test_a_stream_is_read_one_way_and_closing_it_ends_it(toy) -> None:
    stream = toy.stream(NOTE, MODEL)
    assert next(stream)
    with pytest.raises(UsageError, match="read a stream one way"):
        asyncio.run(stream.aresult())
    stream.close()
    with pytest.raises(UsageError, match="closed before its end"):
        stream.result()
    with toy.stream(NOTE, MODEL) as whole:
        assert whole.result().data == {"label": "alpha"} and list(whole) == []  # read: nothing more to read
