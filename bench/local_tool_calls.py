"""Benchmark: do the embedded models call tools usefully, through rosetta's tool loop?

The embedded models have no tool-calling format of their own; ``rosetta.local.tool_calls`` makes
each reply, by grammar, a call of a declared tool (arguments shaped by its schema) or the answer.
The grammar guarantees the *form*; this measures the *choices* the 270M and 135M models make, on
the sql-review agent (tests/fixtures/tools/sql-review.md: ``describe_table`` and ``row_count``
allowed, ``drop_table`` declared but not) over SQL queries that each read one to three tables,
greedy decoding, ``max_tool_steps`` 4, no fallback:

- calls: tool calls made, and the share whose arguments validate against the tool's schema;
- first call useful: the run's first call describes or counts a table its query reads;
- repeats: calls identical to an earlier call of the same run (whose result the model has);
- refused: calls of a tool the run may not use (``drop_table``) or of no declared tool;
- answered: runs ending with an answer valid against the output schema (else the loop's error).

There is no baseline: a hosted model is not reachable here, and without tools the agent cannot do
its job. The rows are what ``README.md`` says about the embedded models and tools.

    python bench/local_tool_calls.py [--model local/gemma-3-270m] [--queries 12]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
AGENT = REPO / "tests" / "fixtures" / "tools" / "sql-review.md"
MODELS = ("local/gemma-3-270m", "local/smollm2-135m-instruct")
TABLES = {
    "users": {"id": "integer", "email": "text", "created_at": "timestamp", "deleted_at": "timestamp"},
    "orders": {"id": "integer", "user_id": "integer", "total_cents": "integer", "placed_at": "timestamp"},
    "payments": {"id": "integer", "order_id": "integer", "status": "text", "amount_cents": "integer"},
    "sessions": {"id": "text", "user_id": "integer", "expires_at": "timestamp"},
    "products": {"id": "integer", "sku": "text", "price_cents": "integer"},
    "audit_log": {"id": "integer", "actor_id": "integer", "action": "text", "at": "timestamp"},
}
ROWS = {"users": 120_000, "orders": 2_400_000, "payments": 2_300_000, "sessions": 9_000_000, "products": 4_000,
        "audit_log": 51_000_000}
QUERIES = [
    "SELECT email FROM users WHERE created_at > now() - interval '1 day'",
    "SELECT * FROM orders WHERE total_cents > 10000",
    "SELECT u.email, o.total_cents FROM users u JOIN orders o ON o.user_id = u.id",
    "DELETE FROM sessions WHERE expires_at < now()",
    "SELECT sku, price_cents FROM products ORDER BY price_cents DESC LIMIT 10",
    "SELECT count(*) FROM audit_log WHERE action = 'login'",
    "SELECT o.id, p.status FROM orders o JOIN payments p ON p.order_id = o.id WHERE p.status = 'failed'",
    "UPDATE users SET deleted_at = now() WHERE email = 'a@example.com'",
    "SELECT * FROM payments",
    "SELECT actor_id, count(*) FROM audit_log GROUP BY actor_id ORDER BY 2 DESC",
    "SELECT s.user_id FROM sessions s JOIN users u ON u.id = s.user_id WHERE u.deleted_at IS NOT NULL",
    "SELECT p.sku, sum(o.total_cents) FROM products p JOIN orders o ON o.id = p.id GROUP BY p.sku",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", action="append", choices=MODELS, help="the embedded model(s) to measure")
    parser.add_argument("--queries", type=int, default=len(QUERIES), help="how many of the queries to run")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO / "src"))

    rows = [measure(model, QUERIES[:args.queries]) for model in args.model or MODELS]
    header = ("model", "runs", "calls", "valid args", "first call useful", "repeats", "refused", "answered",
              "s/run")
    print("| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(str(cell) for cell in row) + " |")


def measure(model: str, queries: list[str]) -> tuple[object, ...]:
    import jsonschema

    import rosetta
    from rosetta import RunOptions
    from rosetta.local.litellm_offline import import_litellm
    from rosetta.runtime.result import ModelCallError

    litellm = import_litellm()

    agent = rosetta.load(AGENT)
    schemas = {spec.name: spec.parameters for spec in agent.prompt_for(model).tool_specs}
    calls = valid = useful = repeats = refused = answered = 0
    started = time.monotonic()
    for query in queries:
        made: list[tuple[str, str]] = []
        seen: list[dict] = []

        def complete(**request: object) -> object:
            """litellm's completion, keeping every call the model makes (refused ones too)."""
            response = litellm.completion(**request)
            for call in response.choices[0].message.tool_calls or []:
                seen.append({"name": call.function.name, "arguments": json.loads(call.function.arguments)})
            return response

        def tool(name: str):
            def run(table: str) -> object:
                if table not in TABLES:
                    raise LookupError(f"no table {table!r}")
                return TABLES[table] if name == "describe_table" else ROWS[table]
            return run

        options = RunOptions(tools={"describe_table": tool("describe_table"), "row_count": tool("row_count")},
                             fallbacks=[], max_tool_steps=4, overrides={"temperature": 0})
        try:
            answered += agent.run({"query": query}, model=model, options=options, complete=complete).valid
        except ModelCallError:
            pass  # the loop's own end: still calling tools, or too many refused calls
        read = set(re.findall(r"\b(?:FROM|JOIN|UPDATE)\s+(\w+)", query, flags=re.I))
        for number, call in enumerate(seen):
            calls += 1
            key = (call["name"], json.dumps(call["arguments"], sort_keys=True))
            repeats += key in made
            made.append(key)
            if call["name"] not in ("describe_table", "row_count"):
                refused += 1
            elif _valid(jsonschema, call["arguments"], schemas[call["name"]]):
                valid += 1
                useful += number == 0 and call["arguments"].get("table") in read
    runs = len(queries)
    share = lambda part, whole: f"{part}/{whole} ({part / whole:.0%})" if whole else "0/0"  # noqa: E731
    return (model, runs, calls, share(valid, calls - refused), share(useful, runs), share(repeats, calls),
            share(refused, calls), share(answered, runs), f"{(time.monotonic() - started) / runs:.1f}")


def _valid(jsonschema: object, arguments: object, schema: dict) -> bool:
    try:
        jsonschema.validate(arguments, schema)  # type: ignore[attr-defined]
    except Exception:
        return False
    return True


if __name__ == "__main__":
    main()
