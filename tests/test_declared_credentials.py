"""Credentials through declarations: a project's ``[tool.rosetta.models]`` names the variables that
hold an endpoint's URL and key, and a cloned repository's pyproject.toml is not to be trusted with
them. ``api_base_env`` must hold a URL (a key named there is refused, never shown); ``doctor`` asks
only endpoints on this machine unless told ``--probe MODEL``, each with its own key alone; a
malformed ``$ROSETTA_MODELS`` is a located error; and no planted secret reaches any output or log
line of any command. The endpoints are real HTTP servers on 127.0.0.1."""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from conftest import PORTABLE, make_project

from rosetta.errors import UsageError
from rosetta.settings import load_settings
from rosetta.providers.catalog import catalog_for


class Recorder:
    """An OpenAI-compatible server on 127.0.0.1 that records each request's method, path and
    Authorization header, and answers with ``status`` (per path prefix, default 200)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.status: dict[str, int] = {}
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def answer(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                self.rfile.read(length)
                recorder.requests.append({"method": self.command, "path": self.path,
                                          "authorization": self.headers.get("Authorization")})
                code = next((c for prefix, c in recorder.status.items() if self.path.startswith(prefix)), 200)
                body = json.dumps({"object": "list", "data": []} if code == 200 else
                                  {"error": {"message": "invalid key", "type": "invalid_request_error"}}).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = answer  # noqa: N815 (http.server naming)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def seen(self, prefix: str) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["path"].startswith(prefix)]


@pytest.fixture
def server() -> Iterator[Recorder]:
    running = Recorder()
    yield running
    running.httpd.shutdown()
    running.httpd.server_close()


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


SECRETS = {name: f"sk-PLANTED-SECRET-{n}{n}{n}-1234567890" for n, name in enumerate(
    ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GITHUB_TOKEN", "PROBED_KEY", "ELSEWHERE_KEY", "DOWN_KEY"))}
"""A planted secret in every variable a declaration names (or litellm would read by itself)."""


def _leaks(text: str) -> list[str]:
    """The 12-character pieces of planted secrets that appear in ``text``."""
    return sorted({secret[i:i + 12] for secret in SECRETS.values() for i in range(len(secret) - 11)
                   if secret[i:i + 12] in text})


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name, secret in SECRETS.items():
        monkeypatch.setenv(name, secret)
    monkeypatch.delenv("UNSET_KEY", raising=False)
    monkeypatch.delenv("ROSETTA_MODELS", raising=False)
    monkeypatch.setenv("COLUMNS", "250")  # a table row per line, unwrapped
    (tmp_path / "cache").write_text("not a folder")  # doctor skips assembling the local weights
    monkeypatch.setenv("ROSETTA_CACHE_DIR", str(tmp_path / "cache"))


def _project(tmp_path: Path, toml: str, preferences: str = "openai/probed") -> Path:
    project = make_project(tmp_path / "project")
    (project / "pyproject.toml").write_text("[project]\nname = 'demo'\n\n" + toml, encoding="utf-8")
    (project / "signatures" / "sorter.md").write_text(PORTABLE.format(name="sorter").replace(
        "[anthropic/claude-sonnet-5-5, openai/gpt-4o]", f"[{preferences}]"), encoding="utf-8")
    return project


def _model(model_id: str, **settings: str) -> str:
    lines = "".join(f'{key} = "{value}"\n' for key, value in settings.items())
    return (f'[tool.rosetta.models."{model_id}"]\n{lines}structured_output = "json_object"\n'
            "context_window = 32768\nmax_output_tokens = 1024\n\n")


def _row(output: str, model_id: str) -> str:
    return next(line for line in output.splitlines() if line.strip().startswith(model_id + " "))


def test_doctor_probes_loopback_endpoints_and_others_only_when_told(tmp_path, cli, env, server):
    project = _project(tmp_path, "".join((
        _model("openai/probed", api_base=f"http://127.0.0.1:{server.port}/probed/v1", api_key_env="PROBED_KEY"),
        _model("openai/by-name", api_base=f"http://localhost:{server.port}/by-name/v1"),
        # the same server by a name that is not loopback by its text: for doctor, another machine
        _model("openai/elsewhere", api_base=f"http://0x7f000001:{server.port}/elsewhere/v1",
               api_key_env="ELSEWHERE_KEY"),
        _model("hosted_vllm/v6", api_base=f"http://[::1]:{_closed_port()}/v1"))))
    result = cli("--project", project, "doctor")
    assert result.exit_code == 0, result.output
    assert "declared endpoints ([tool.rosetta.models])" in result.output
    assert "reachable (HTTP 200)" in _row(result.output, "openai/probed")
    assert "reachable (HTTP 200)" in _row(result.output, "openai/by-name")
    assert "not probed (pass --probe openai/elsewhere to probe it)" in _row(result.output, "openai/elsewhere")
    assert "unreachable" in _row(result.output, "hosted_vllm/v6")  # ::1 is this machine too: asked
    assert sorted((r["method"], r["path"], r["authorization"] or "") for r in server.requests) == [
        ("GET", "/by-name/v1/models", ""),  # no key declared: none sent (not OPENAI_API_KEY)
        ("GET", "/probed/v1/models", f"Bearer {SECRETS['PROBED_KEY']}")]  # its own key, no other
    server.requests.clear()
    server.status["/elsewhere"] = 401
    told = cli("--project", project, "doctor", "--probe", "openai/elsewhere")
    assert "answers HTTP 401 (check the key in $ELSEWHERE_KEY)" in _row(told.output, "openai/elsewhere")
    assert server.seen("/elsewhere") == [{"method": "GET", "path": "/elsewhere/v1/models",
                                          "authorization": f"Bearer {SECRETS['ELSEWHERE_KEY']}"}]
    assert not _leaks(result.output + told.output)


def test_probe_takes_only_a_declared_endpoint(tmp_path, cli, env):
    project = _project(tmp_path, _model("openai/probed", api_base="http://127.0.0.1:9/v1"))
    for name, message in (("openai/nope", "--probe openai/nope: no declared model with an endpoint"),
                          ("gpt-4o", "--probe gpt-4o: not a declared model with an endpoint")):
        result = cli("--project", project, "doctor", "--probe", name)
        assert result.exit_code == 2 and message in result.output and "declared endpoints: openai/probed" in \
            result.output and "Traceback" not in result.output
    assert "--probe" in cli("doctor", "--help").output


def test_api_base_env_holding_a_key_is_refused_without_showing_it(tmp_path, cli, env, server):
    """The issue's case: ``api_base_env = "OPENAI_API_KEY"`` printed the key, and the key would have
    gone out as a URL. Now each command names the variable, field, model and declaration line."""
    project = _project(tmp_path, _model("openai/probed", api_base_env="OPENAI_API_KEY", api_key_env="GITHUB_TOKEN"))
    line = next(n for n, row in enumerate((project / "pyproject.toml").read_text().splitlines(), 1)
                if row.startswith("api_base_env"))
    doctor = cli("--project", project, "doctor")
    assert doctor.exit_code == 0
    text = " ".join(doctor.output.split())
    assert "openai/probed: $OPENAI_API_KEY does not hold the endpoint's URL: it does not start with http:// or " \
           "https://" in text and f"pyproject.toml:{line}" in text
    run = cli("--project", project, "run", "sorter", "-m", "openai/probed", "-i", "request=x")
    assert run.exit_code == 2 and "Traceback" not in run.output
    assert '$OPENAI_API_KEY: tool.rosetta.models."openai/probed".api_base_env' in run.output
    assert not server.requests and not _leaks(doctor.output + run.output)


@pytest.mark.parametrize("value, reason", [
    ("http://127.0.0.1:8123/v1\nHost: evil", "whitespace or a control character"),
    ("http://127.0.0.1:8123/v1\x07", "whitespace or a control character"),
    ("http://127.0.0.1 :8123/v1", "whitespace or a control character"),
    ("ftp://127.0.0.1/v1", "does not start with http:// or https://"),
    ("http:///v1", "names no host"),
    ("http://127.0.0.1:port/v1", "host or port is malformed"),
    ("http://me:sk-PLANTED-SECRET-999-1234567890@127.0.0.1/v1", "carries credentials"),
    ("http://127.0.0.1/v1?key=sk-PLANTED-SECRET-999-1234567890", "query or fragment"),
])
def test_the_url_in_the_variable_is_checked_like_api_base(tmp_path, cli, env, monkeypatch, value, reason):
    project = _project(tmp_path, _model("openai/probed", api_base_env="PROBED_URL"))
    monkeypatch.setenv("PROBED_URL", value)
    dirs = load_settings(project)
    with pytest.raises(UsageError) as caught:
        catalog_for(dirs.root, dirs.models).resolve("openai/probed").connection()
    problem = caught.value.problems[0]
    assert problem.location.file == "$PROBED_URL" and problem.field.endswith('"openai/probed".api_base_env')
    assert reason in problem.message
    doctor = cli("--project", project, "doctor")
    assert doctor.exit_code == 0 and reason in " ".join(doctor.output.split())
    for text in (str(caught.value), doctor.output):
        assert "PLANTED" not in text and "evil" not in text and ":8123" not in text


@pytest.mark.parametrize("value, message", [
    ("{bad", "$ROSETTA_MODELS is not valid JSON: Expecting property name"),
    ("[1, 2]", "$ROSETTA_MODELS"),
    ('{"openai/srv": 5}', "$ROSETTA_MODELS"),
    ('{"openai/srv": {"api_bse": "http://127.0.0.1:1/v1"}}', "did you mean 'api_base'?"),
])
def test_a_malformed_rosetta_models_is_a_located_error(tmp_path, cli, env, monkeypatch, value, message):
    project = _project(tmp_path, "")
    monkeypatch.setenv("ROSETTA_MODELS", value)
    for command in (("models",), ("doctor",), ("run", "sorter", "-i", "request=x"), ("show", "sorter", "-m", "gpt-4o")):
        result = cli("--project", project, *command)
        assert result.exit_code == 2, (command, result.output)
        assert message in result.output and "$ROSETTA_MODELS" in result.output, (command, result.output)
        assert "Traceback" not in result.output


def test_no_secret_reaches_any_output_or_log(tmp_path, cli, env, server, caplog, monkeypatch):
    """Every key-bearing field declared, each variable holding a planted secret; every command that
    shows a model or its endpoint, and every error path, printed and logged: no secret, nor any
    12-character piece of one, anywhere."""
    monkeypatch.setenv("PROBED_URL", f"http://127.0.0.1:{server.port}/probed/v1")
    server.status["/probed"] = 401  # the run's request is refused: an error path with the key sent
    declared = {
        "openai/probed": {"api_base_env": "PROBED_URL", "api_key_env": "PROBED_KEY"},
        "openai/misdeclared": {"api_base_env": "OPENAI_API_KEY", "api_key_env": "GITHUB_TOKEN"},
        "openai/elsewhere": {"api_base": f"http://0x7f000001:{server.port}/elsewhere/v1",
                             "api_key_env": "ELSEWHERE_KEY"},
        "openai/keyless": {"api_base": f"http://127.0.0.1:{server.port}/keyless/v1", "api_key_env": "UNSET_KEY"},
        "openai/down": {"api_base": f"http://127.0.0.1:{_closed_port()}/v1", "api_key_env": "DOWN_KEY"},
    }
    project = _project(tmp_path, "".join(_model(m, **s) for m, s in declared.items()),
                       preferences="openai/probed")
    commands: list[tuple[str, ...]] = [("doctor",), ("doctor", "--probe", "openai/elsewhere"), ("models",),
                                       ("models", "--format", "json")]
    for model in declared:
        commands += [("models", "--check", model, "--agent", "sorter"),
                     ("models", "--check", model, "--agent", "sorter", "--format", "json"),
                     ("render", str(project / "signatures" / "sorter.md"), "--model", model),
                     ("show", "sorter", "--model", model, "--prompt"),
                     ("run", "sorter", "-m", model, "-i", "request=x")]
    caplog.set_level(logging.DEBUG)
    outputs = []
    for command in commands:
        result = cli("--project", project, *command)
        assert "Traceback" not in result.output, (command, result.output)
        outputs.append(result.output)
    seen = "\n".join(outputs) + caplog.text + "\n".join(r.getMessage() for r in caplog.records)
    assert not _leaks(seen), _leaks(seen)  # litellm's and the OpenAI client's debug lines included
    # the commands ran their paths: every error named its variable, and the probed endpoint got its key
    for expected in ("$OPENAI_API_KEY does not hold the endpoint's URL", "$UNSET_KEY is not set",
                     "answers HTTP 401 (check the key in $PROBED_KEY)", "unreachable", "openai/down",
                     "refusing to send $ELSEWHERE_KEY"):
        assert expected in " ".join(seen.split()), expected
    # the project names the elsewhere server (not written as loopback): only `doctor --probe`, the
    # user's own request, sends it the key; `run` refuses to (issue 81)
    sent = {(r["method"], r["path"].split("/")[1], r["authorization"]) for r in server.requests}
    assert sent == {(method, "probed", f"Bearer {SECRETS['PROBED_KEY']}") for method in ("GET", "POST")} | {
        ("GET", "elsewhere", f"Bearer {SECRETS['ELSEWHERE_KEY']}")}
