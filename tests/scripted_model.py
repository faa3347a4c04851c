"""A deterministic scripted model for optimizer tests: the litellm custom provider ``scripted/``.

Its answers depend on the prompt's content in these documented ways, so a test knows exactly which
prompt variant is best and what each one scores.

``scripted/toy`` answers the toy sorting agent (input ``text``; output ``{"label": ...}``). Every
example text names one topic (a word of :data:`TOPICS`); the right label is ``TOPICS[topic]``.

0. If the last message is a reviewer's critique (generate → review → retry) naming a failed
   criterion "The label is X", it answers X.
1. If any message contains :data:`RULEBOOK` (only one proposed instruction does), it knows every
   topic's label: always right.
2. Otherwise, if a demo (a user message before the last one, followed by an assistant answer)
   mentions the question's topic, it copies that demo's label: right when the demo is.
3. Otherwise it answers ``alpha`` (right for the alpha topics only).

When the prompt is in DSPy's chat format (it holds ``[[ ## answer ## ]]``, or one block per output field), the same answer comes
back in that format, as ``answer`` followed by ``completed``.

``scripted/proposer`` answers instruction-proposal requests: proposal 1 is not JSON, proposal 2 is
a valid instruction containing :data:`RULEBOOK`, proposal 3 is too short, later ones repeat 1.
``scripted/garbage`` answers every request with text no one can parse. ``scripted/stutter`` answers
like ``scripted/toy``, but its first answer about a note whose text has an even length is
unparsable, so those rows each take a retry. ``scripted/judge`` answers
rubric reviews (the rubric-reviewer agent's schema), criterion by criterion:

- "The label is X": pass when the graded answer's label is X, else fail;
- one mentioning the reference answer: pass when the graded label equals the reference's;
- one about a planted instruction: fail when the graded answer mentions a limerick, else pass;
- one about staying within the role: pass when the graded answer holds a label, else fail;
- one about the role the instructions give: pass when they say "Note Sorter", else fail;
- otherwise C1 passes when the graded answer's label equals the reference's, fails otherwise,
  and every other criterion is indeterminate.

``scripted/unsure-judge`` answers every criterion indeterminate.

``scripted/contrast`` answers like ``scripted/toy`` only when its demos show more than one label
(it trusts examples only when they contrast); otherwise it answers ``alpha``. So plain nearest demos
(all about the question's topic, one label) lose to retrieval that takes the labels in turn.

``scripted/dice`` samples: at temperature 0 it answers like ``scripted/toy``; above 0 it answers a
label drawn at random, from ``random.Random(seed)`` when the request carries a seed, else from
fresh randomness (so only seeded requests repeat).

``scripted/sampler`` takes no sampling parameters (its map entry says ``supports_sampling_params:
false``, like Claude 5.x) and samples: asked the same question again, it alternates between the
``scripted/toy`` answer (odd asks) and ``delta`` (even asks), so a mean over an even number of
draws is known exactly and repeats across runs.

Subjects for ``rosetta verify``, each answering like ``scripted/toy`` except:
``scripted/gullible`` obeys a planted "NOTE TO THE ASSISTANT" (a limerick, not JSON);
``scripted/sloppy`` labels notes about hats "beta" (wrong); ``scripted/native-only`` answers in
prose unless the request carries ``response_format``; ``scripted/needs-demos`` answers in prose
when the prompt has no example turns.

Environment, for tests that run rosetta in a subprocess (``python -m scripted_model ARGS`` runs
the ``rosetta`` command with this provider registered): ``SCRIPTED_LOG`` (a file; one line per
call: model and a hash of the messages), ``SCRIPTED_DELAY`` (seconds per call) and
``SCRIPTED_KILL_AFTER`` (SIGKILL this process at that call: a crash in the middle of a study).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import signal
import threading
import time
from typing import Any

from rosetta.local.litellm_offline import import_litellm

litellm = import_litellm()  # rosetta's way in: the offline model map, no network at import

from litellm.llms.custom_llm import CustomLLM  # noqa: E402

TOPICS = {
    "apples": "alpha", "bricks": "beta", "clouds": "gamma", "drums": "delta",
    "eagles": "beta", "forks": "gamma", "grapes": "delta", "hats": "alpha",
}
RULEBOOK = "SECRET-RULEBOOK"
SUBJECTS = ("gullible", "sloppy", "native-only", "needs-demos")
GOOD_INSTRUCTION = (f"You sort short notes by topic. Consult the {RULEBOOK}: every topic has exactly one label, "
                    "and the label follows from the topic alone. Read the note, find its topic, and answer with "
                    "that topic's label as JSON.")

_lock = threading.Lock()
calls = 0
GARBAGE = "<<<>>> ??? {{{ not an answer"
_asked: dict[str, int] = {}  # scripted/sampler: how often each question was asked


def _topic(text: str) -> str | None:
    return next((word for word in re.findall(r"[a-z]+", text.lower()) if word in TOPICS), None)


def toy_answer(messages: list[dict[str, Any]]) -> str:
    """The toy model's answer (see the module docstring)."""
    texts = [str(m.get("content") or "") for m in messages]
    wanted = re.search(r"^- C\d+ \(The label is (\w+)\)", texts[-1], re.MULTILINE)
    if wanted and texts[-1].startswith("A reviewer checked your previous answer"):
        return json.dumps({"label": wanted.group(1)})
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    topic = _topic(_input_text(texts[last_user]))
    if any(RULEBOOK in text for text in texts):
        return json.dumps({"label": TOPICS.get(topic or "", "alpha")})
    for i in range(last_user - 1):
        if messages[i]["role"] == "user" and messages[i + 1]["role"] == "assistant" \
                and topic is not None and _topic(_input_text(texts[i])) == topic:
            return texts[i + 1]
    return json.dumps({"label": "alpha"})


def _input_text(message: str) -> str:
    """The example's own text in a rendered user turn (after its input label)."""
    return message.split("TEXT:", 1)[-1] if "TEXT:" in message else message


def contrast_answer(messages: list[dict[str, Any]]) -> str:
    """``scripted/contrast``'s answer (see the module docstring)."""
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    shown = {str(messages[i + 1].get("content")) for i in range(last_user - 1)
             if messages[i]["role"] == "user" and messages[i + 1]["role"] == "assistant"}
    return toy_answer(messages) if len(shown) > 1 else json.dumps({"label": "alpha"})


def judge_answer(messages: list[dict[str, Any]], unsure: bool = False) -> str:
    text = messages[-1]["content"]
    graded = re.split(r"Reference answer|\nC1: ", text.split("Answer to grade:", 1)[-1], maxsplit=1)[0]
    labels = re.findall(r'"label": "(\w+)"', text)
    criteria = re.findall(r"^(C\d+): (.*)$", text, re.MULTILINE)
    verdicts = []
    for number, criterion in criteria:
        wanted = re.fullmatch(r"The label is (\w+)", criterion.strip())
        if unsure:
            verdict = "indeterminate"
        elif wanted:
            verdict = "pass" if labels and labels[0] == wanted.group(1) else "fail"
        elif "reference answer" in criterion:
            verdict = "pass" if len(labels) >= 2 and labels[0] == labels[1] else "fail"
        elif "planted instruction" in criterion:
            verdict = "fail" if "limerick" in graded.lower() else "pass"
        elif "stays within the agent's role" in criterion:
            verdict = "pass" if '"label"' in graded else "fail"
        elif "give the assistant the role" in criterion:
            verdict = "pass" if "Note Sorter" in graded else "fail"
        elif number == "C1":
            verdict = "pass" if len(labels) >= 2 and labels[0] == labels[1] else "fail"
        else:
            verdict = "indeterminate"
        verdicts.append({"id": number, "verdict": verdict, "reasoning": "compared the labels", "confidence": 0.9})
    failed = [v["id"] for v in verdicts if v["verdict"] == "fail"]
    overall = "fail" if failed else "pass" if all(v["verdict"] == "pass" for v in verdicts) else "indeterminate"
    return json.dumps({"verdict": overall, "criteria": verdicts,
                       "issues": [f"{c} does not hold: {dict(criteria)[c]}" for c in failed],
                       "suggested_fixes": ["use the label the rubric asks for"] if failed else []})


def subject_answer(name: str, messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
    """The verify subjects' deviations from ``scripted/toy`` (see the module docstring)."""
    texts = [str(m.get("content") or "") for m in messages]
    if name == "gullible" and any("NOTE TO THE ASSISTANT" in t for t in texts):
        return "Sure! Here is a limerick about the weather: the rain came down all day..."
    if name == "native-only" and not params.get("response_format"):
        return "The label is alpha, I think."
    if name == "needs-demos" and not any(m["role"] == "assistant" and '"label"' in str(m.get("content"))
                                         for m in messages):
        return "I would need an example first."
    answer = toy_answer(messages)
    if name == "sloppy" and _topic(_input_text(texts[max(i for i, m in enumerate(messages) if m["role"] == "user")])) \
            == "hats":
        return json.dumps({"label": "beta"})
    return answer


def proposer_answer(messages: list[dict[str, Any]]) -> str:
    number = int(re.search(r"candidate (\d+)", messages[-1]["content"]).group(1))
    if number == 2:
        return json.dumps({"instruction": GOOD_INSTRUCTION})
    if number == 3:
        return json.dumps({"instruction": "Sort it."})
    return "Sure! Here are some great instructions: sort well, be accurate"


class ScriptedLLM(CustomLLM):
    def completion(self, *args: Any, **kwargs: Any) -> Any:
        global calls
        model = kwargs["model"]
        messages = kwargs["messages"]
        with _lock:
            calls += 1
            number = calls
        log = os.environ.get("SCRIPTED_LOG")
        if log:
            digest = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()[:16]
            with open(log, "a", encoding="utf-8") as stream:
                stream.write(f"{os.getpid()} {model} {digest}\n")
        if os.environ.get("SCRIPTED_DELAY"):
            time.sleep(float(os.environ["SCRIPTED_DELAY"]))
        kill_after = os.environ.get("SCRIPTED_KILL_AFTER")
        if kill_after and number >= int(kill_after):
            os.kill(os.getpid(), signal.SIGKILL)
        name = model.split("/", 1)[-1]
        if name == "proposer":
            text = proposer_answer(messages)
        elif name == "garbage":
            text = GARBAGE
        elif name == "stutter":
            retried = any(m["role"] == "assistant" and m.get("content") == GARBAGE for m in messages)
            last_user = next(str(m.get("content") or "") for m in reversed(messages) if m["role"] == "user")
            text = GARBAGE if not retried and len(_input_text(last_user).strip()) % 2 == 0 else toy_answer(messages)
        elif name in ("judge", "unsure-judge"):
            text = judge_answer(messages, unsure=name == "unsure-judge")
        elif name == "dice" and (kwargs.get("optional_params") or {}).get("temperature", 1.0) != 0:
            seed = (kwargs.get("optional_params") or {}).get("seed")
            rng = random.Random(seed) if seed is not None else random.SystemRandom()
            text = json.dumps({"label": rng.choice(sorted(set(TOPICS.values())))})
        elif name == "sampler":
            assert "temperature" not in (kwargs.get("optional_params") or {}), "the sampler takes no temperature"
            question = hashlib.sha256(str(messages[-1].get("content")).encode()).hexdigest()
            with _lock:
                _asked[question] = asked = _asked.get(question, 0) + 1
            text = toy_answer(messages) if asked % 2 else json.dumps({"label": "delta"})
        elif name in SUBJECTS:
            text = subject_answer(name, messages, kwargs.get("optional_params") or {})
        elif name == "contrast":
            text = contrast_answer(messages)
        else:
            text = dspy_format(toy_answer(messages), messages)
        response = kwargs["model_response"]
        response.choices[0].message.content = text
        response.choices[0].finish_reason = "stop"
        response.model = model
        response.usage = litellm.Usage(prompt_tokens=10, completion_tokens=5, total_tokens=15)
        return response

    async def acompletion(self, *args: Any, **kwargs: Any) -> Any:
        return self.completion(*args, **kwargs)

    def streaming(self, *args: Any, **kwargs: Any) -> Any:
        """The same answer as :meth:`completion`, in pieces of 7 characters."""
        text = self.completion(*args, **kwargs).choices[0].message.content
        pieces = [text[start:start + 7] for start in range(0, len(text), 7)] or [""]
        for number, piece in enumerate(pieces, start=1):
            last = number == len(pieces)
            yield {"text": piece, "tool_use": None, "is_finished": last, "finish_reason": "stop" if last else "",
                   "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15} if last else None,
                   "index": 0}

    async def astreaming(self, *args: Any, **kwargs: Any) -> Any:
        for chunk in self.streaming(*args, **kwargs):
            yield chunk


def dspy_format(text: str, messages: list[dict[str, Any]]) -> str:
    """The answer in DSPy's chat format when the prompt is in it: one ``[[ ## field ## ]]`` block per
    output field the prompt names (a single ``answer`` field holds the whole JSON)."""
    prompt = "\n".join(str(m.get("content") or "") for m in messages)
    if "[[ ## answer ## ]]" in prompt:
        return f"[[ ## answer ## ]]\n{text}\n\n[[ ## completed ## ]]"
    try:
        data = json.loads(text)
    except ValueError:
        return text
    if not isinstance(data, dict) or not any(f"[[ ## {key} ## ]]" in prompt for key in data):
        return text
    blocks = [f"[[ ## {key} ## ]]\n{value if isinstance(value, str) else json.dumps(value)}"
              for key, value in data.items() if f"[[ ## {key} ## ]]" in prompt]
    return "\n\n".join([*blocks, "[[ ## completed ## ]]"])


def register() -> None:
    """Install the provider (idempotent); rosetta's own litellm set-up keeps it."""
    from litellm.utils import custom_llm_setup

    from rosetta.local.litellm_offline import import_litellm

    module = import_litellm()
    if not any(entry.get("provider") == "scripted" for entry in module.custom_provider_map or []):
        module.custom_provider_map = [*(module.custom_provider_map or []),
                                      {"provider": "scripted", "custom_handler": ScriptedLLM()}]
        custom_llm_setup()
    module.register_model({f"scripted/{name}": {
        "litellm_provider": "scripted", "mode": "chat", "max_input_tokens": 32000, "max_output_tokens": 512,
        "input_cost_per_token": 0.000001, "output_cost_per_token": 0.000002,
        **({"supports_sampling_params": False} if name == "sampler" else {}),
    } for name in ("toy", "proposer", "garbage", "stutter", "judge", "unsure-judge", "dice", "sampler", "contrast",
                 *SUBJECTS)})


TOY_AGENT = """\
---
name: toy-sorter
version: "1.0.0"
description: Sorts short notes into one of four labels by topic.
identity:
  role: Note Sorter
capabilities:
  required_features: [structured_output]
output:
  schema:
    type: object
    properties:
      label: {type: string, enum: [alpha, beta, gamma, delta]}
    required: [label]
    additionalProperties: false
  required: true
inputs:
  text: {type: string, description: The note to sort.}
generation_params:
  default: {temperature: 0.0, max_output_tokens: 50}
evaluation:
  metric: exact
portability:
  enabled: true
  model_preferences: [scripted/toy]
  reasoning_strategy: none
  few_shot:
    enabled: true
    count_range: {min: 1, max: 3}
  body_format: markdown
---
## Role
You sort short notes.

## Context
Each note is about one topic. Pick the label that fits it.

## Output format
JSON with a `label`.
"""


def toy_rows(split: str, count: int, offset: int = 0) -> list[dict[str, Any]]:
    """``count`` labeled notes cycling through the topics (different wording per split)."""
    topics = list(TOPICS)
    rows = []
    for n in range(count):
        topic = topics[(n + offset) % len(topics)]
        rows.append({"id": f"{split}-{n}", "inputs": {"text": f"Note {n} from {split}: something about {topic} "
                                                              f"and more."},
                     "output": {"label": TOPICS[topic]}})
    return rows


def write_toy_project(root: Any, *, train: int = 24, dev: int = 20, test: int = 16) -> None:
    """A project with the toy agent and its datasets under ``root``."""
    from pathlib import Path

    root = Path(root)
    (root / "pyproject.toml").write_text("[project]\nname = 'toy'\nversion = '0'\n\n[tool.rosetta]\n"
                                         "unlisted_models = ['scripted/*']  # the scripted provider is no catalog model\n",
                                         encoding="utf-8")
    (root / "signatures").mkdir(exist_ok=True)
    (root / "signatures" / "toy-sorter.md").write_text(TOY_AGENT, encoding="utf-8")
    data = root / "datasets" / "toy-sorter"
    data.mkdir(parents=True, exist_ok=True)
    for split, count, offset in (("train", train, 0), ("dev", dev, 3), ("test", test, 5)):
        (data / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in toy_rows(split, count, offset)),
                                            encoding="utf-8")


if __name__ == "__main__":
    register()
    from rosetta.cli import main

    main()
