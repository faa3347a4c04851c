"""Models a project declares in ``[tool.rosetta.models]``: merged over the catalog field by field,
used by render, compile, the runtime and the CLI, and refused with the key and line when malformed."""

from __future__ import annotations

import json
import logging
import textwrap
from pathlib import Path

import pytest
from conftest import REPO, make_project

import rosetta
from rosetta.settings import load_settings
from rosetta.definition.loader import load_definition
from rosetta.errors import ConfigError, Location, RenderError, UsageError
from rosetta.settings import load_settings
from rosetta.providers.adapter import bundled_adapters
from rosetta.providers.catalog import catalog_for, load_catalog
from rosetta.providers.endpoints import NO_KEY
from rosetta.providers.kinds import StructuredOutput
from rosetta.render.renderer import prompt_budget, render
from rosetta.signature import lower

SERVER = """
[tool.rosetta.models."openai/gemma-270m-server"]
api_base = "http://127.0.0.1:8766/v1"
api_key_env = "MY_SERVER_KEY"
adapter = "open-source"
class = "open"
context_window = 32768
max_output_tokens = 1024
prompt_style = "chat"
structured_output = "json_object"
family = "gemma"
aliases = ["my-gemma"]
"""


def _project(tmp_path: Path, toml: str) -> Path:
    project = make_project(tmp_path / "project")
    (project / "pyproject.toml").write_text("[project]\nname = 'demo'\n" + textwrap.dedent(toml), encoding="utf-8")
    return project


def test_a_declared_endpoint_resolves_by_id_and_alias_with_every_field(tmp_path):
    settings = load_settings(_project(tmp_path, SERVER))
    catalog = catalog_for(settings.root, settings.models)
    model = catalog.resolve("my-gemma")
    assert catalog.resolve("openai/gemma-270m-server") is model
    assert (model.adapter, model.model_class, model.context_window, model.max_output, model.prompt_style,
            model.family, model.source) == ("open-source", "open", 32768, 1024, "chat", "gemma", "project")
    assert model.structured_output is StructuredOutput.JSON_OBJECT and model.capabilities.structured_output
    assert model.endpoint.api_base == "http://127.0.0.1:8766/v1" and model.endpoint.api_key_env == "MY_SERVER_KEY"
    # the runtime's reader of the same table agrees
    dirs = load_settings(settings.root)
    assert catalog_for(dirs.root, dirs.models).resolve("my-gemma") == model
    assert "openai/gemma-270m-server" not in load_catalog().names()  # the bundled catalog is untouched


def test_the_key_is_read_from_its_variable_at_call_time_and_never_another_providers(tmp_path, monkeypatch):
    settings = load_settings(_project(tmp_path, SERVER))
    model = catalog_for(settings.root, settings.models).resolve("my-gemma")
    monkeypatch.delenv("MY_SERVER_KEY", raising=False)
    with pytest.raises(UsageError, match=r"\$MY_SERVER_KEY is not set"):
        model.connection()
    monkeypatch.setenv("MY_SERVER_KEY", "sk-self-hosted")
    assert model.connection() == {"api_base": "http://127.0.0.1:8766/v1", "api_key": "sk-self-hosted"}
    keyless = _project(tmp_path / "b", '[tool.rosetta.models."openai/srv"]\napi_base_env = "SRV_URL"\n')
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-openai-key")
    monkeypatch.setenv("SRV_URL", "http://10.0.0.5:8000/v1")
    settings = load_settings(keyless)
    assert catalog_for(settings.root, settings.models).resolve("openai/srv").connection() == {
        "api_base": "http://10.0.0.5:8000/v1", "api_key": NO_KEY}


def test_overriding_a_built_in_window_changes_the_render_budget(tmp_path):
    signature = lower(load_definition(REPO / "signatures" / "vuln-triage.md"))  # needs an 8,192-token window
    adapters = bundled_adapters()
    built_in = load_catalog().resolve("openai/gpt-4o")
    settings = load_settings(_project(tmp_path, """
        [tool.rosetta.models."openai/gpt-4o"]
        context_window = 16000
        max_output_tokens = 1000
        """))
    small = catalog_for(settings.root, settings.models).resolve("gpt-4o")  # aliases still resolve
    assert small.id == built_in.id and small.context_window == 16000 and small.aliases == built_in.aliases
    assert small.capabilities == built_in.capabilities and small.source == "project"
    before, after = render(signature, built_in), render(signature, small)
    adapter = adapters[built_in.adapter]
    assert prompt_budget(signature, adapter, small, after.generation) < 16000 < prompt_budget(
        signature, adapter, built_in, before.generation)
    assert after.generation["max_tokens"] <= 1000
    # a window below what the agent needs is refused, naming both
    settings = load_settings(_project(tmp_path / "tiny", '[tool.rosetta.models."openai/gpt-4o"]\n'
                                                         'context_window = 3000\nmax_output_tokens = 1000\n'))
    with pytest.raises(RenderError, match="needs a 8,192-token context window; openai/gpt-4o has 3,000"):
        render(signature, catalog_for(settings.root, settings.models).resolve("gpt-4o"))


@pytest.mark.parametrize("entry, field, message", [
    ('context_window = "big"', "context_window", "is not a positive whole number"),
    ("context_window = 0", "context_window", "is not a positive whole number"),
    ('structured_output = "json_schemas"', "structured_output", "did you mean 'json_schema'"),
    ('class = "huge"', "class", "is not one of frontier, mid, open"),
    ('api_base = "127.0.0.1:8000"', "api_base", "is not an http(s) URL"),
    ('api_base = "http://127.0.0.1:8000/v1\\nHost: evil"', "api_base", "whitespace or a control character"),
    ('api_base = "http://127.0.0.1 :8000/v1"', "api_base", "whitespace or a control character"),
    ('api_base = "file:///etc/passwd"', "api_base", "does not start with http:// or https://"),
    ('api_base = "http://me:hunter2@127.0.0.1/v1"', "api_base", "carries credentials"),
    ('api_key_env = "sk-123 abc"', "api_key_env", "is not an environment variable's name"),
    ("context_windw = 4096", "context_windw", "did you mean 'context_window'"),
    ("max_output_tokens = 9000\ncontext_window = 4096", "max_output_tokens", "exceeds the context window"),
    ('aliases = "mine"', "aliases", "is not a list of names"),
    ("capabilities = {tool_use = 1}", "capabilities.tool_use", "is not a known flag"),
])
def test_a_malformed_entry_names_the_key_and_its_line(tmp_path, cli, entry, field, message):
    project = _project(tmp_path, f'[tool.rosetta]\nstrict = false\n\n[tool.rosetta.models."openai/srv"]\n'
                                 f'family = "mine"\n{entry}\n')
    text = (project / "pyproject.toml").read_text()
    key = field.split(".")[0]
    line = next(n for n, row in enumerate(text.splitlines(), 1) if row.startswith((key + " ", key + "=")))
    settings = load_settings(project)
    with pytest.raises(ConfigError) as caught:
        catalog_for(settings.root, settings.models)
    problem = caught.value.problems[0]
    assert problem.field == f'tool.rosetta.models."openai/srv".{field}'
    assert (problem.location.file, problem.location.line) == (str(project / "pyproject.toml"), line)
    assert message in problem.format() and "hunter2" not in problem.format()  # a URL's password is not shown
    # every command says so, without a traceback
    result = cli("--project", project, "models")
    assert result.exit_code != 0 and f"pyproject.toml:{line}" in result.output and "Traceback" not in result.output


def test_entries_from_rosetta_models_are_refused_naming_the_variable(tmp_path, monkeypatch):
    """``$ROSETTA_MODELS`` is merged over the file: a key it sets is located there, the file's own
    keys still at their lines."""
    project = _project(tmp_path, SERVER)
    for value, field in (('{"openai/gemma-270m-server": {"context_windw": 4096}}', "context_windw"),
                         ('{"openai/other": 5}', None),
                         ('{"openai/other": {"api_base": "http://127.0.0.1:1/v1\\nX: y"}}', "api_base")):
        monkeypatch.setenv("ROSETTA_MODELS", value)
        dirs = load_settings(project)  # the runtime's reader leaves each entry's shape to the catalog
        with pytest.raises(ConfigError) as caught:
            catalog_for(dirs.root, dirs.models)
        problem = caught.value.problems[0]
        assert problem.location.file == "$ROSETTA_MODELS" and problem.location.line is None
        assert problem.field.endswith(f".{field}" if field else '"openai/other"')
    monkeypatch.setenv("ROSETTA_MODELS", '{"openai/gemma-270m-server": {"aliases": ["sonnet"]}}')
    settings = load_settings(project)
    with pytest.raises(ConfigError) as caught:  # the key the variable sets: located in the variable
        catalog_for(settings.root, settings.models)
    assert caught.value.problems[0].location.file == "$ROSETTA_MODELS"
    monkeypatch.setenv("ROSETTA_MODELS", '{"openai/gemma-270m-server": {"family": "gemma"}}')
    settings = load_settings(project)
    catalog = catalog_for(settings.root, settings.models)
    assert catalog.declared_at("openai/gemma-270m-server", "family").file == "$ROSETTA_MODELS"
    pyproject = project / "pyproject.toml"
    line = next(n for n, row in enumerate(pyproject.read_text().splitlines(), 1) if row.startswith("api_key_env"))
    assert catalog.declared_at("openai/gemma-270m-server", "api_key_env") == Location(str(pyproject), line)


def test_an_unknown_provider_or_an_id_without_one_is_refused(tmp_path):
    for toml, message in (('[tool.rosetta.models."myserver/x"]\ncontext_window = 10\nmax_output_tokens = 5\n',
                           "litellm has no provider 'myserver'"),
                          ('[tool.rosetta.models.gemma]\ncontext_window = 10\n', "is not a provider/model id")):
        settings = load_settings(_project(tmp_path / str(len(message)), toml))
        with pytest.raises(ConfigError, match=message):
            catalog_for(settings.root, settings.models)


def test_an_alias_taken_by_another_model_is_refused(tmp_path):
    settings = load_settings(_project(tmp_path, '[tool.rosetta.models."openai/srv"]\naliases = ["sonnet"]\n'))
    with pytest.raises(ConfigError, match="'sonnet' already names anthropic/claude-sonnet-5-5"):
        catalog_for(settings.root, settings.models)


def test_editing_a_declaration_makes_its_artifact_stale(tmp_path, cli, caplog):
    project = _project(tmp_path, SERVER)
    assert cli("--project", project, "compile", project / "signatures" / "vuln-triage.md",
               "--model", "my-gemma").exit_code == 0
    artifact = project / "compiled" / "vuln-triage" / "openai" / "gemma-270m-server.yaml"
    assert "structured_output: json_object" in artifact.read_text()
    agent = rosetta.load("vuln-triage", project=project)
    assert agent.explain("my-gemma").kind == "artifact"
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("context_window = 32768", "context_window = 32000"))
    with caplog.at_level(logging.WARNING, logger="rosetta.runtime"):
        selection = rosetta.load("vuln-triage", project=project).explain("my-gemma")
    assert selection.kind == "uncompiled" and "catalog entry changed" in selection.reason
    listing = cli("--project", project, "models", "--format", "json")
    row = next(r for r in json.loads(listing.output) if r["id"] == "openai/gemma-270m-server")
    assert row["source"] == "project" and row["endpoint"]["api_key_env"] == "MY_SERVER_KEY"
    assert "1 declared by this project" in cli("--project", project, "models").output


def test_models_check_reports_mechanism_budget_and_endpoint(tmp_path, cli):
    project = _project(tmp_path, SERVER)
    result = cli("--project", project, "models", "--check", "my-gemma", "--agent", "vuln-triage", "--format", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["structured_output"] == "json_object" and report["schema_in"] == "prompt"
    assert report["request"] == {"response_format": {"type": "json_object", "schema": "{…}"}}
    assert report["api_base"] == "http://127.0.0.1:8766/v1" and report["api_key"] == "$MY_SERVER_KEY"
    assert 0 < report["prompt_tokens"] <= report["prompt_budget"] < 32768
    text = cli("--project", project, "models", "--check", "my-gemma").output
    assert "structured output: json_object" in text and "prompt budget" in text


def test_family_fallback_never_crosses_prompt_styles(tmp_path, cli):
    """The server and the embedded model are both family gemma: the base model's completion-style
    artifact must not be served to the chat endpoint, and the reason says why it was skipped."""
    project = _project(tmp_path, SERVER)
    assert cli("--project", project, "compile", project / "signatures" / "vuln-triage.md",
               "--model", "local/gemma-3-270m").exit_code == 0
    selection = rosetta.load("vuln-triage", project=project).explain("my-gemma")
    assert selection.kind == "uncompiled" and selection.prompt.system_placement.value == "system_message"
    assert ("gemma-3-270m.yaml for local/gemma-3-270m: skipped, its system placement is completion"
            in selection.reason)
    # issue 54: a declared model's artifact was made for its own endpoint, and never serves another id
    other = _project(tmp_path / "b", SERVER + '\n[tool.rosetta.models."openai/gemma-big"]\nadapter = "open-source"\n'
                                              'family = "gemma"\nstructured_output = "json_object"\n'
                                              'context_window = 32768\nmax_output_tokens = 1024\n')
    assert cli("--project", other, "compile", other / "signatures" / "vuln-triage.md",
               "--model", "openai/gemma-big").exit_code == 0
    for model in ("my-gemma", "openai/gpt-4o"):
        stand_in = rosetta.load("vuln-triage", project=other).explain(model)
        assert stand_in.kind == "uncompiled", model
        assert "gemma-big.yaml for openai/gemma-big: skipped, made for that declared model's own endpoint" \
            in stand_in.reason


def test_when_every_declared_endpoint_is_down_the_error_names_each_model(tmp_path, monkeypatch):
    import socket

    from rosetta.runtime.result import ModelCallError, RetryPolicy

    ports = []
    for _ in range(2):  # ports nothing listens on: a connection is refused at once
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            ports.append(probe.getsockname()[1])
    project = _project(tmp_path, "".join(
        f'[tool.rosetta.models."{provider}/down-{n}"]\napi_base = "http://127.0.0.1:{port}/v1"\n'
        'structured_output = "json_object"\ncontext_window = 32768\nmax_output_tokens = 1024\n'
        for n, (provider, port) in enumerate(zip(("openai", "hosted_vllm"), ports, strict=True))))
    agent = rosetta.load("vuln-triage", project=project)
    with pytest.raises(ModelCallError) as caught:
        agent.run({"report": "SQL injection in the login form lets anyone dump the users table."},
                  "openai/down-0", fallbacks=["hosted_vllm/down-1"], policy=RetryPolicy(attempts=1))
    text = str(caught.value)
    assert "every model of the chain failed" in text
    assert "openai/down-0" in text and "hosted_vllm/down-1" in text
    assert [a.model for a in caught.value.attempts] == ["openai/down-0", "hosted_vllm/down-1"]


DEPLOYMENT = """
[tool.rosetta.models."azure/my-gpt4o-deploy"]
base_model = "openai/gpt-4o"
"""


def test_a_deployment_with_a_base_model_renders_like_that_model_on_its_host(tmp_path):
    """Issue 80: an Azure deployment name says nothing of its model; ``base_model`` (litellm's own
    convention) gives it that model's rules, and litellm the name it picks Azure's parameters by."""
    settings = load_settings(_project(tmp_path, DEPLOYMENT))
    catalog = catalog_for(settings.root, settings.models)
    deployment, hosted = catalog.resolve("azure/my-gpt4o-deploy"), catalog.resolve("azure/gpt-4o")
    assert (deployment.model_class, deployment.context_window, deployment.max_output, deployment.capabilities,
            deployment.structured_output, deployment.underlying) == (
        hosted.model_class, hosted.context_window, hosted.max_output, hosted.capabilities, hosted.structured_output,
        "openai/gpt-4o")
    assert deployment.connection() == {"base_model": "openai/gpt-4o"}
    signature = lower(load_definition(settings.root / "signatures" / "vuln-triage.md", root=settings.root))
    mine, theirs = render(signature, deployment), render(signature, hosted)
    assert (mine.system, mine.generation, mine.request_params, mine.structured_output) == (
        theirs.system, theirs.generation, theirs.request_params, theirs.structured_output)


def test_an_undeclared_deployment_gets_one_warning_naming_base_model(caplog):
    from rosetta.providers import catalog as catalog_module

    catalog_module._announced.discard("azure/team-prod-chat")
    with caplog.at_level(logging.WARNING, logger="rosetta.providers.catalog"):
        load_catalog().resolve("azure/team-prod-chat")
        load_catalog().resolve("azure/team-prod-chat")
    said = [r.getMessage() for r in caplog.records if "azure/team-prod-chat" in r.getMessage()]
    assert len(said) == 1 and 'base_model = "<its id>"' in said[0] and "8,192-token window" in said[0]


@pytest.mark.parametrize(("value", "message"), [
    ("openai/gpt-99-imaginary", "is neither a catalog model nor one litellm's model map lists"),
    (7, "is not a model id"),
])
def test_a_base_model_rosetta_cannot_place_is_refused_at_its_line(tmp_path, cli, value, message):
    toml = DEPLOYMENT.replace('"openai/gpt-4o"', json.dumps(value))
    project = _project(tmp_path, toml)
    result = cli("--project", project, "render", project / "signatures" / "vuln-triage.md", "-m", "azure/my-gpt4o-deploy")
    assert result.exit_code == 2 and message in result.output, result.output
    assert "pyproject.toml:5: " in result.output and ".base_model" in result.output  # the line of base_model


WINDOW_AGENT = """---
name: long-logs
description: Summarizes long logs.
portability:
  enabled: true
  body_format: markdown
  minimum_context_window: 16000
  model_preferences:
    - groq/llama-3.3-70b-versatile
    - groq/qwen-next-99b
---
## Role
You summarize logs.
"""


def test_validate_refuses_what_compile_refuses_with_the_same_words_and_a_line(tmp_path, cli):
    """Issue 80: a window too small for the agent fails ``validate`` at the preference naming the
    model (RS-007), in compile's own words, and ``compile --check`` reports the refusal instead of
    sending the user to a compile that will fail. Llama 3.3 70B on Groq has its real window."""
    project = tmp_path / "project"
    (project / "signatures").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[project]\nname = 'logs'\n", encoding="utf-8")
    definition = project / "signatures" / "long-logs.md"
    definition.write_text(WINDOW_AGENT, encoding="utf-8")
    refused = "long-logs needs a 16,000-token context window; groq/qwen-next-99b has 8,192"
    checked = cli("--project", project, "validate", definition, "--strict", "-f", "json")
    assert checked.exit_code == 1
    findings = json.loads(checked.stdout)["files"][0]["findings"]
    assert [(f["id"], f["line"]) for f in findings] == [("RS-007", 10)] and refused in findings[0]["message"]
    compiled = cli("--project", project, "compile")
    assert compiled.exit_code == 1 and refused in compiled.output
    check = cli("--project", project, "compile", "--check")
    assert check.exit_code == 1 and refused in check.output and "run `rosetta compile`" not in check.output.split(
        "groq/qwen-next-99b")[1]
