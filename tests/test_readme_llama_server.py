"""Issue 59: the README's "Your own models" example works as written: its declaration and its
llama.cpp server command agree on the key, so a user who copies both (and exports nothing) gets
answers. The server here is tests/fault_server.py on 127.0.0.1, playing llama.cpp's OpenAI API."""

from __future__ import annotations

import json
import re
import shutil
import tomllib

from conftest import REPO
from documented import guide_text
from fault_server import FaultServer
from rosetta.runtime.agent import load

README = guide_text()  # the README and the guide ("Your own models")
DECLARATION = next(block for block in re.findall(r"```toml\n(.*?)```", README, re.S)
                   if "[tool.rosetta.models." in block and "api_base" in block)
LLAMA_CPP = next(line for line in README.splitlines() if line.startswith("| llama.cpp"))
GOOD = json.dumps({"severity": "high", "rationale": "Unauthenticated SQL injection in the login form."})


def declared() -> tuple[str, dict]:
    ((model_id, entry),) = tomllib.loads(DECLARATION)["tool"]["rosetta"]["models"].items()
    return model_id, entry


def test_the_declaration_and_the_server_command_agree_on_the_key():
    _, entry = declared()
    command = re.search(r"`(python -m llama_cpp\.server[^`]*)`", LLAMA_CPP).group(1)
    assert entry["api_base"].startswith("http://127.0.0.1:8766/") and "--port 8766" in command
    if "api_key_env" in entry:  # then the server is started with that variable's key
        assert f'--api_key "${entry["api_key_env"]}"' in command, (entry["api_key_env"], command)
    else:
        assert "--api_key" not in command


def test_the_declared_server_answers_with_nothing_exported(tmp_path, monkeypatch):
    model_id, entry = declared()
    for name in ("MY_SERVER_KEY", "MY_SERVER_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "signatures").mkdir()
    shutil.copy(REPO / "signatures" / "vuln-triage.md", tmp_path / "signatures")
    with FaultServer([("ok", GOOD)]) as server:
        (tmp_path / "pyproject.toml").write_text(
            "[project]\nname = 'demo'\n\n" + DECLARATION.replace(entry["api_base"], server.url), encoding="utf-8")
        agent = load("vuln-triage", project=tmp_path)
        result = agent.run({"report": "SQL injection in the login form lets an unauthenticated attacker bypass "
                                      "authentication."}, "my-gemma")
    assert result.valid and result.model == model_id
    assert [r["authorization"] for r in server.requests] == ["Bearer none"]  # never a vendor's key
