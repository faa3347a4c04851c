"""Settings (rosetta.settings, the one loader the CLI and the runtime share): [tool.rosetta] < ROSETTA_* <
explicit overrides; relative paths from the project root."""

from __future__ import annotations

import pytest

from rosetta import load
from rosetta.errors import ConfigError
from rosetta.settings import load_settings


@pytest.fixture
def configured(project):
    (project / "pyproject.toml").write_text(
        "[project]\nname='x'\n\n[tool.rosetta]\ncompiled_dir = 'build/compiled'\n"
        "default_models = ['openai/gpt-4o']\nstrict = true\n")
    (project / "sub" / "dir").mkdir(parents=True)
    return project


def test_reads_pyproject_walking_up(configured, monkeypatch):
    monkeypatch.chdir(configured / "sub" / "dir")
    settings = load_settings()
    assert settings.root == configured.resolve()
    assert settings.compiled_dir == configured.resolve() / "build" / "compiled"
    assert settings.signatures_dir == configured.resolve() / "signatures"
    assert settings.default_models == ("openai/gpt-4o",) and settings.strict is True


def test_environment_overrides_file_and_arguments_override_environment(configured, monkeypatch):
    monkeypatch.setenv("ROSETTA_COMPILED_DIR", "/tmp/elsewhere")
    monkeypatch.setenv("ROSETTA_DEFAULT_MODELS", "a/b, c/d")
    monkeypatch.setenv("ROSETTA_STRICT", "false")
    settings = load_settings(configured)
    assert str(settings.compiled_dir) == "/tmp/elsewhere"
    assert settings.default_models == ("a/b", "c/d") and settings.strict is False
    settings = load_settings(configured, compiled_dir="out", strict=True)
    assert settings.compiled_dir == configured.resolve() / "out" and settings.strict is True


def test_unknown_key_is_an_error_with_line_and_hint(project):
    (project / "pyproject.toml").write_text("[tool.rosetta]\n\ndefault_model = ['x/y']\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(project)
    (problem,) = caught.value.problems
    assert problem.location.line == 3 and problem.hint == "did you mean 'default_models'?"



def test_a_root_key_is_refused_not_ignored(project):
    """The root is the folder of the pyproject.toml that configures it: a ``root`` key there was
    read by nothing, so the project silently stayed where it was."""
    (project / "pyproject.toml").write_text("[tool.rosetta]\nstrict = true\nroot = '/tmp'\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(project)
    (problem,) = caught.value.problems
    assert problem.location.line == 3 and problem.field == "tool.rosetta.root"
    assert "cannot be set" in problem.message and "--project/-C" in problem.hint and "$ROSETTA_ROOT" in problem.hint
    (project / "pyproject.toml").write_text("[tool.rosetta]\nroots = 'x'\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(project)
    assert "'root'" not in (caught.value.problems[0].hint or "")  # never suggested as a setting

def test_bad_value_names_its_source(project, monkeypatch):
    (project / "pyproject.toml").write_text("[tool.rosetta]\nstrict = 'maybe'\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(project)
    assert "[tool.rosetta]" in caught.value.problems[0].message and caught.value.problems[0].location.line == 2
    (project / "pyproject.toml").write_text("")
    monkeypatch.setenv("ROSETTA_DEFAULT_MODELS", "[broken")
    with pytest.raises(ConfigError) as caught:
        load_settings(project)
    assert caught.value.problems[0].location.file == "$ROSETTA_DEFAULT_MODELS"


def test_invalid_toml_is_reported(project):
    (project / "pyproject.toml").write_text("[tool.rosetta\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(project)
    assert "invalid TOML" in caught.value.problems[0].message


def test_no_pyproject_uses_defaults(tmp_path):
    settings = load_settings(tmp_path)
    assert settings.root == tmp_path.resolve() and settings.section_roles == {}


def test_unknown_environment_variable_is_warned(project, monkeypatch, caplog):
    monkeypatch.setenv("ROSETTA_STRCT", "1")
    load_settings(project)
    assert "did you mean ROSETTA_STRICT" in caplog.text


@pytest.mark.parametrize("value, message, line_column", [
    ("{bad", "$ROSETTA_MODELS is not valid JSON: Expecting property name enclosed in double quotes", (1, 2)),
    ('{"openai/x": {"api_base": "http://127.0.0.1:1/v1",\n "aliases": [}}', "is not valid JSON", (2, 14)),
    ("[1, 2]", "$ROSETTA_MODELS", (None, None)),
    ('"openai/x"', "$ROSETTA_MODELS", (None, None)),
])
def test_a_malformed_rosetta_models_names_the_variable_and_what_it_must_hold(project, monkeypatch, value, message,
                                                                              line_column):
    """The variable, where in it, a JSON object expected, an example."""
    monkeypatch.setenv("ROSETTA_MODELS", value)
    for read in (load_settings, lambda root: load("x", project=root)):  # the CLI's reader is the runtime's
        with pytest.raises(ConfigError) as caught:
            read(project)
        (problem,) = caught.value.problems
        assert message in problem.message and problem.field == "models"
        assert problem.location.file == "$ROSETTA_MODELS"
        if line_column[0] is not None:
            assert (problem.location.line, problem.location.column) == line_column
        assert problem.expected == "a JSON object, merged over [tool.rosetta.models]"
        assert "export ROSETTA_MODELS='{\"openai/my-model\": {\"api_base\"" in problem.hint


def test_a_rosetta_models_entry_that_is_not_a_table_is_refused_by_the_catalog_naming_the_variable(project, monkeypatch):
    from rosetta.providers.catalog import catalog_for

    monkeypatch.setenv("ROSETTA_MODELS", '{"openai/x": 5}')
    settings = load_settings(project)  # each entry's shape is the catalog's to judge
    with pytest.raises(ConfigError) as caught:
        catalog_for(settings.root, settings.models)
    (problem,) = caught.value.problems
    assert problem.location.file == "$ROSETTA_MODELS" and problem.field.endswith('"openai/x"')


def test_every_setting_is_typed_and_a_bad_one_names_its_source(project, monkeypatch):
    (project / "pyproject.toml").write_text("[tool.rosetta]\nlocal_threads = 0\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(project)
    assert "local_threads must be a positive integer" in str(caught.value)
    assert caught.value.problems[0].location.line == 2
    (project / "pyproject.toml").write_text("[tool.rosetta.section_roles]\n'House rules' = 'constrains'\n")
    with pytest.raises(ConfigError, match="which is no RCCF role") as caught:
        load_settings(project)
    assert caught.value.problems[0].location.line == 2 and caught.value.problems[0].field == "section_roles.House rules"
    (project / "pyproject.toml").write_text("[tool.rosetta]\nunlisted_models = 'openai/*'\n")
    assert load_settings(project).unlisted_models == ("openai/*",)  # one pattern, as text
    monkeypatch.setenv("ROSETTA_STRICT", "sometimes")
    with pytest.raises(ConfigError) as caught:
        load_settings(project)
    assert caught.value.problems[0].location.file == "$ROSETTA_STRICT" and "(from environment)" in str(caught.value)
    with pytest.raises(ConfigError, match=r"strict must be true or false, not 'never' \(from argument\)"):
        load_settings(project, strict="never")


def test_state_paths_have_one_owner(project):
    state = load_settings(project).state
    assert state.path == project.resolve() / ".rosetta"
    assert state.eval_cache == state.path / "eval-cache.sqlite"
    assert state.study("vuln-triage", "local/gemma-3-270m") == state.path / "studies/vuln-triage/local__gemma-3-270m.journal"
    assert state.outcomes("vuln-triage") == state.path / "outcomes/vuln-triage.jsonl"


def test_the_root_comes_from_an_argument_or_rosetta_root_else_the_pyproject_folder(configured, tmp_path, monkeypatch):
    monkeypatch.setenv("ROSETTA_ROOT", str(tmp_path / "elsewhere"))
    assert load_settings(configured).root == (tmp_path / "elsewhere").resolve()
    assert load_settings(configured).compiled_dir == (tmp_path / "elsewhere" / "build" / "compiled").resolve()
    assert load_settings(configured, root=configured / "sub").root == (configured / "sub").resolve()
    monkeypatch.delenv("ROSETTA_ROOT")
    assert load_settings(configured / "sub" / "dir").root == configured.resolve()
