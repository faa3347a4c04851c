"""The rosetta command: exit codes, formats, defaults from config, and no tracebacks."""

from __future__ import annotations

import importlib.metadata
import json

import jsonschema


def test_validate_clean_file_exits_0(cli, portable):
    result = cli("validate", portable("ok"))
    assert result.exit_code == 0, result.output
    assert "1 files · 1 loaded · 0 errors" in result.stdout


def test_validate_errors_exit_1_and_show_line_and_fix(cli, portable):
    result = cli("validate", portable("bad", {"openai/gpt-4o]": "gpt-4o]"}))
    assert result.exit_code == 1
    assert "20:5" in result.stdout and "PV-006" in result.stdout and "provider/model" in result.stdout


def test_warnings_fail_only_with_strict(cli, write):
    path = write("cc.md", "---\nname: cc\nmodel: sonnet\n---\nbody\n")
    assert cli("validate", path).exit_code == 0
    assert cli("validate", "--strict", path).exit_code == 1


def test_unloadable_file_exits_2_without_traceback(cli, write):
    result = cli("validate", write("broken.md", "---\nname: [unclosed\n---\n"))
    assert result.exit_code == 2
    assert "Traceback" not in result.output and "broken.md:2" in result.output


def test_missing_path_exits_2(cli, project):
    result = cli("validate", project / "nope")
    assert result.exit_code == 2 and "no such file or directory" in result.output


def test_bad_option_is_a_usage_error(cli):
    assert cli("validate", "--format", "xml").exit_code == 2


def test_json_and_sarif_to_file(cli, portable, project, monkeypatch):
    monkeypatch.chdir(project)
    path = portable("ok")
    result = cli("validate", "--format", "json", path)
    assert json.loads(result.stdout)["summary"]["files"] == 1
    result = cli("validate", "-f", "sarif", "-o", project / "out.sarif", path)
    assert result.exit_code == 0
    assert json.loads((project / "out.sarif").read_text())["version"] == "2.1.0"


def test_validate_defaults_to_configured_signatures_dir(cli, portable, project, monkeypatch):
    (project / "pyproject.toml").write_text("[tool.rosetta]\nsignatures_dir = 'agents'\n")
    (project / "agents").mkdir()
    portable("ok").rename(project / "agents" / "ok.md")
    monkeypatch.chdir(project)
    result = cli("validate")
    assert result.exit_code == 0 and "agents/ok.md" in result.stdout
    assert cli("--signatures-dir", "missing", "validate").exit_code == 2


def test_config_errors_are_reported(cli, project, monkeypatch):
    (project / "pyproject.toml").write_text("[tool.rosetta]\nsignature_dir = 'x'\n")
    monkeypatch.chdir(project)
    result = cli("validate")
    assert result.exit_code == 2 and "did you mean 'signatures_dir'" in result.output


def test_list_shows_agents_and_formats(cli, portable, write, project):
    portable("one")
    write("two.md", "---\nname: two\ntools: Read\n---\nbody\n")
    rows = json.loads(cli("list", project, "--format", "json").stdout)
    assert [(r["name"], r["format"], r["portable"]) for r in rows] == [("one", "portable", True),
                                                                       ("two", "claude_code", False)]
    text = cli("list", project)
    assert text.exit_code == 0 and "claude_code" in text.stdout


def test_list_reports_broken_files_with_exit_2(cli, portable, write, project):
    portable("one")
    write("bad.md", "---\nname: bad\n")
    result = cli("list", project)
    assert result.exit_code == 2 and "never closed" in result.output


def test_schema_is_valid_json_schema_and_accepts_the_bundled_frontmatter(cli):
    schema = json.loads(cli("schema").stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert "portability" in schema["properties"] and schema["properties"]["name"]["description"]
    import yaml

    from conftest import PORTABLE
    frontmatter = yaml.safe_load(PORTABLE.format(name="x").split("---")[1])
    jsonschema.Draft202012Validator(schema).validate(frontmatter)


def test_version(cli):
    from rosetta import __version__

    assert cli("--version").stdout.strip() == f"rosetta {__version__}"


def test_directory_without_agents_is_a_usage_error(cli, project):
    (project / "empty").mkdir()
    result = cli("validate", project / "empty")
    assert result.exit_code == 2 and "no agent definitions found" in result.output


def test_text_report_shows_load_problems_with_hints(cli, write):
    result = cli("validate", write("tabs.md", "---\nname: t\nidentity:\n\trole: x\n---\nbody\n"))
    assert result.exit_code == 2 and "tabs.md:4" in result.stdout and "indent with spaces" in result.stdout


def test_models_lists_the_catalog(cli):
    rows = json.loads(cli("models", "-f", "json").stdout)
    assert any(r["id"] == "gemini/gemini-2.5-pro" and "gemini/2.5-pro" in r["aliases"] for r in rows)
    assert cli("models").exit_code == 0


def test_models_shows_each_models_status_and_replacement(cli):
    rows = {r["id"]: r for r in json.loads(cli("models", "-f", "json").stdout)}
    assert rows["anthropic/claude-sonnet-5-5"]["status"] == "current"
    retired = rows["anthropic/claude-sonnet-4-20250514"]
    assert retired["status"] == "retired" and retired["replacement"] == "anthropic/claude-sonnet-5-5"
    assert retired["retires"] == "2026-06-15" and "model-deprecations" in retired["retirement_source"]
    text = cli("models").stdout
    assert "retired" in text and "reviewed 2026-11-26" in " ".join(text.split())


def test_doctor_lists_artifacts_compiled_for_retired_models(cli, tree, monkeypatch):
    monkeypatch.chdir(tree)
    assert cli("compile", "signatures/vuln-triage.md", "-m", "sonnet").exit_code == 0
    current = tree / "compiled/vuln-triage/anthropic/claude-sonnet-5-5.yaml"
    old = current.with_name("claude-sonnet-4-20250514.yaml")  # as an older rosetta left it
    old.write_text(current.read_text().replace("model: anthropic/claude-sonnet-5-5",
                                               "model: anthropic/claude-sonnet-4-20250514"))
    result = cli("doctor")
    assert result.exit_code == 0
    squashed = " ".join(result.output.split())
    assert "vuln-triage on anthropic/claude-sonnet-4-20250514: retired 2026-06-15, replace with " \
           "anthropic/claude-sonnet-5-5" in squashed
    assert "claude-sonnet-4-20250514.yaml" in "".join(squashed.split()) and "5-5.yaml" not in squashed


def test_render_shows_the_prompt_with_inputs_filled(cli):
    from conftest import REPO

    result = cli("render", REPO / "signatures" / "vuln-triage.md", "--model", "gemini/2.5-pro",
                 "--input", "report=SQLi in the login form")
    assert result.exit_code == 0, result.output
    assert "## Role" in result.stdout and "SQLi in the login form" in result.stdout
    assert "response_format" in result.stdout and "maxLength" in result.stderr  # Gemini drop warning


def test_render_formats_and_manual_mode(cli, tmp_path):
    import yaml

    from conftest import REPO

    agent = REPO / "signatures" / "vuln-triage.md"
    data = json.loads(cli("render", agent, "-m", "sonnet", "-f", "json").stdout)
    assert data["system"].startswith("<role>") and data["structured_output"] == "output_config"
    assert yaml.safe_load(cli("render", agent, "-m", "sonnet", "-f", "yaml").stdout)["adapter"] == "anthropic"
    (tmp_path / "report.txt").write_text("heap overflow in parser")
    manual = cli("render", agent, "-m", "openai/gpt-4o", "--manual", "-i", f"report=@{tmp_path / 'report.txt'}")
    assert "=== REQUEST ===" in manual.stdout and "heap overflow in parser" in manual.stdout


def test_render_errors_exit_2(cli):
    from conftest import REPO

    agent = REPO / "signatures" / "vuln-triage.md"
    unknown = cli("render", agent, "-m", "gpt-99")
    assert unknown.exit_code == 2 and "nearest catalog names" in unknown.output
    small = cli("render", REPO / "signatures" / "advisory-extractor.md", "-m", "ollama/gemma2")  # needs 32,000
    assert small.exit_code == 2 and "context window" in small.output
    bad_input = cli("render", agent, "-m", "sonnet", "-i", "nokey")
    assert bad_input.exit_code == 2 and "NAME=VALUE" in bad_input.output
    missing = cli("render", agent, "-m", "sonnet", "-i", "other=x")
    assert missing.exit_code == 2 and "unknown input" in missing.output


def test_compile_check_show_and_diff(cli, tree, monkeypatch):
    monkeypatch.chdir(tree)
    assert cli("compile", "--check").exit_code == 1
    first = cli("compile", "-m", "sonnet", "-m", "openai/gpt-4o")
    assert first.exit_code == 0 and "6 written" in first.stdout
    again = cli("compile", "-m", "sonnet", "-m", "openai/gpt-4o")
    assert "6 up to date" in again.stdout
    assert cli("compile", "--check", "-m", "sonnet", "-m", "openai/gpt-4o").exit_code == 0
    shown = cli("show", "vuln-triage", "--model", "opus")
    assert shown.exit_code == 0 and "uncompiled" in shown.stdout and "claude-sonnet-5-5.yaml for" in shown.stdout
    diff = cli("diff", "vuln-triage", "-m", "sonnet", "-m", "openai/gpt-4o")
    assert diff.exit_code == 0 and "-<role>" in diff.stdout and "+## Role" in diff.stdout
    assert cli("diff", "vuln-triage", "-m", "sonnet").exit_code == 2
    failing = cli("compile", "-m", "ollama/gemma2")
    assert failing.exit_code == 1 and "context window" in failing.stdout


def test_models_outside_the_catalog_are_accepted_unless_the_project_gates_them(cli, tree, monkeypatch):
    """Issue 54: any id litellm routes compiles, renders and is checked; ``unlisted_models`` is the
    strict gate, refused the same way on every command that takes a model."""
    monkeypatch.chdir(tree)
    assert cli("compile", "signatures/vuln-triage.md", "-m", "deepseek/deepseek-chat").exit_code == 0
    assert (tree / "compiled/vuln-triage/deepseek/deepseek-chat.yaml").is_file()
    assert cli("compile", "--check", "signatures/vuln-triage.md", "-m", "deepseek/deepseek-chat").exit_code == 0
    rendered = cli("render", "signatures/vuln-triage.md", "-m", "deepseek/deepseek-chat")
    assert rendered.exit_code == 0 and "from its compiled artifact" in rendered.stdout
    with (tree / "pyproject.toml").open("a") as config:
        config.write("unlisted_models = ['azure/*']\n")
    for command in (("compile", "signatures/vuln-triage.md"), ("render", "signatures/vuln-triage.md"),
                    ("show", "vuln-triage"), ("run", "vuln-triage", "-i", "report=" + "SQL injection in the login form. " * 3)):
        refused = cli(*command, "-m", "deepseek/deepseek-chat")
        assert refused.exit_code in (1, 2) and "only the ids unlisted_models names" in refused.output, command
    assert cli("render", "signatures/vuln-triage.md", "-m", "azure/gpt-4o").exit_code == 0


def test_run_answers_through_a_real_server(cli, tree, monkeypatch):
    from fault_server import FaultServer

    monkeypatch.chdir(tree)
    answer = {"severity": "low", "rationale": "Self-XSS that needs the victim to paste a payload."}
    with FaultServer([("ok", json.dumps(answer))]) as server:
        monkeypatch.setenv("OPENAI_API_BASE", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
        result = cli("run", "vuln-triage", "-m", "openai/gpt-4o", "-i",
                     "report=Self-XSS in the profile page requires the victim to paste attacker JavaScript.")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == answer and "openai/gpt-4o" in result.stderr
    short = cli("run", "vuln-triage", "-m", "openai/gpt-4o", "-i", "report=short")
    assert short.exit_code == 2 and "40 characters" in short.output


def test_doctor_reports_credentials_without_printing_them(cli, monkeypatch, local_model):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-doctor-secret-0123456789abcdef")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    result = cli("doctor")
    assert result.exit_code == 0
    assert "sk-doctor-secret" not in result.output and "ANTHROPIC_API_KEY" in result.output
    assert f"litellm {importlib.metadata.version('litellm')}: ok" in result.output
    assert f"{local_model}: weights ok" in result.output


def test_doctor_says_why_local_weights_are_unavailable(cli, monkeypatch, tmp_path):
    (tmp_path / "cache").write_text("a file where the cache folder should be")
    monkeypatch.setenv("ROSETTA_CACHE_DIR", str(tmp_path / "cache"))
    result = cli("doctor")
    assert result.exit_code == 0
    assert "weights unavailable" in result.output and "ROSETTA_CACHE_DIR" in result.output


def test_run_manual_mode_writes_the_prompt_and_reads_the_answer(cli, tree, monkeypatch):
    monkeypatch.chdir(tree)
    answer = {"severity": "critical", "rationale": "Pre-auth RCE in the upload handler."}
    (tree / "answer.txt").write_text("Sure! Here it is:\n```json\n" + json.dumps(answer) + "\n```\n")
    result = cli("run", "vuln-triage", "--manual", "--answer-file", "answer.txt", "-i",
                 "report=Unauthenticated remote code execution through the file upload handler.")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == answer
    prompt = (tree / "vuln-triage-prompt.md").read_text()  # the Python API's name (issue 59)
    assert "=== SYSTEM CONTEXT ===" in prompt and "file upload handler" in prompt


def test_model_manual_is_manual_mode(cli, tree, monkeypatch):
    monkeypatch.chdir(tree)
    answer = {"severity": "low", "rationale": "Needs local access and a debug build."}
    (tree / "answer.txt").write_text(json.dumps(answer))
    result = cli("run", "vuln-triage", "--model", "manual", "--prompt-file", "p.md", "--answer-file", "answer.txt",
                 "-i", "report=A debug endpoint reachable only from localhost leaks stack traces.")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == answer and "=== REQUEST ===" in (tree / "p.md").read_text()


def test_run_with_model_manual_in_python(tree, monkeypatch):
    from rosetta.runtime.agent import load

    monkeypatch.chdir(tree)
    agent = load("vuln-triage", project=tree)
    result = agent.run({"report": "A debug endpoint reachable only from localhost leaks stack traces."},
                       model="manual", answer='{"severity": "low", "rationale": "Local only."}')
    assert result.valid and result.model == "manual" and result.output.severity == "low"
    assert "localhost leaks stack traces" in (tree / "vuln-triage-prompt.md").read_text()
    bad = agent.run({"report": "A debug endpoint reachable only from localhost leaks stack traces."},
                    model="manual", answer='{"severity": "urgent"}')
    assert not bad.valid and {i.path for i in bad.issues} >= {"$.severity"}


def test_compile_optimize_hands_the_same_search_flags_as_optimize(cli, tree, monkeypatch):
    from pathlib import Path
    from types import SimpleNamespace

    import rosetta.cli.build
    import rosetta.cli.optimize
    from rosetta.cli.optimize_targets import SearchFlags

    seen = []
    monkeypatch.chdir(tree)
    monkeypatch.setattr(rosetta.cli.build, "optimize_paths",
                        lambda ctx, paths, models, flags, check, out: seen.append(flags) or 0)
    monkeypatch.setattr(rosetta.cli.optimize, "optimize_targets",
                        lambda ctx, definitions, models, flags, worker: seen.append(flags) or 0)
    monkeypatch.setattr(rosetta.cli.optimize, "load_agent",
                        lambda ctx, agent: SimpleNamespace(name=agent, definition_path=Path(f"{agent}.md")))
    flags = ["--trials", "5", "--fixed-demos", "--metric", "fields", "--max-cost", "0.5", "-j", "3", "--force"]
    assert cli("compile", "-m", "sonnet", "--optimize", *flags).exit_code == 0
    assert cli("optimize", "vuln-triage", "-m", "sonnet", *flags).exit_code == 0
    expected = SearchFlags(metric="fields", trials=5, max_cost=0.5, jobs=3, force=True, nearest_demos=False)
    assert seen == [expected, expected]
    assert cli("compile", "-m", "sonnet", "--optimize").exit_code == 0 and seen[-1] == SearchFlags(jobs=1)


def test_an_agent_name_typo_gets_a_suggestion(cli, tree):
    typo = cli("--project", tree, "show", "vuln-traige", "--model", "openai/gpt-4o")
    assert typo.exit_code == 2 and "no agent named 'vuln-traige'" in typo.output
    assert "did you mean 'vuln-triage'?" in typo.output
    unknown = cli("--project", tree, "run", "zzz", "-i", "x=y")
    assert "known agents: advisory-extractor, code-reviewer, vuln-triage" in unknown.output


def test_flags_show_no_value_type_in_help(cli):
    for command in ("run", "compile", "verify"):
        text = cli(command, "--help").output
        assert "<bool>" not in text and "--help" in text
    assert "<str>" in cli("run", "--help").output  # options that take a value still show its type


def test_doctor_does_not_ask_ollama_for_a_key(cli, tree, monkeypatch):
    monkeypatch.delenv("OLLAMA_API_BASE", raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    text = cli("--project", tree, "doctor").output
    row = next(line for line in text.splitlines() if line.strip().startswith("ollama_chat"))
    assert "none needed" in row and "missing" not in row


def test_render_and_diff_show_the_request_litellm_sends(cli, tree):
    definition = tree / "signatures" / "vuln-triage.md"
    plain = cli("render", definition, "--model", "sonnet")
    filled = cli("render", definition, "--model", "sonnet", "-i", "report=SQL injection in the login form.")
    for result in (plain, filled):  # one layout, with or without inputs
        assert result.exit_code == 0, result.output
        assert "=== SYSTEM CONTEXT ===" not in result.stdout and "OUTPUT INSTRUCTIONS" not in result.stdout
        assert "--- system ---" in result.stdout and "--- user ---" in result.stdout
        assert "--- output_config ---" in result.stdout and "max_tokens:" in result.stdout  # what Sonnet receives
    assert "<report>\n{{report}}\n</report>" in plain.stdout and "SQL injection in the login form." in filled.stdout
    diff = cli("--project", tree, "diff", "vuln-triage", "--model", "sonnet", "--model", "openai/gpt-4o").stdout
    assert "-model: anthropic/claude-sonnet-5-5" in diff and "+--- response_format ---" in diff
    manual = cli("render", definition, "--model", "ollama/llama3.1", "--manual").stdout
    assert manual.count('"enum"') == 1  # the schema once: it is already in the prompt's format section


def test_help_fits_80_columns_without_cutting_anything_off(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    commands = [["compile"], ["optimize"], ["evaluate"], ["verify"], ["run"], ["render"], ["models"], ["trials"],
                ["doctor"], ["versions"], ["experiment", "start"], ["experiment", "promote"]]
    for command in commands:
        text = cli(*command, "--help").output
        cut = [line for line in text.splitlines() if "…" in line.replace("PV-011…PV-019", "").replace(
            "PV-001…PV-010", "")]
        assert not cut and max(len(line) for line in text.splitlines()) <= 80, (command, cut)
