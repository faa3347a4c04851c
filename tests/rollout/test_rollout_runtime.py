"""The runtime follows rollout.yaml: pinned versions, sticky arms in the Result, and clean fallbacks
when the file is missing or broken (the call still works, and the log says why, once)."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

from rollout_project import GOOD, MODEL, REPORT, variant, versions  # noqa: F401  (a fixture)
from rosetta.errors import RolloutError
from rosetta.store.routing import assign
from rosetta.store.versions import versions_dir
from rosetta.runtime.agent import load

OLD_TEXT, NEW_TEXT = "precise and neutral", "calm"


def experiment(active: str, treatment: str, share: float = 0.5, extra: str = "") -> str:
    return f"active: {active}\nexperiment:\n  id: exp-1\n  treatment: {treatment}\n  share: {share}\n{extra}"


def rollout_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "rosetta.runtime" and "rollout" in r.getMessage()]


def test_without_a_rollout_file_the_compiled_artifact_answers_outside_any_experiment(versions, caplog):
    agent = load("vuln-triage", project=versions.tree)
    with caplog.at_level(logging.WARNING, logger="rosetta.runtime"):
        result = agent.run(REPORT, model=MODEL, user_id="user-1", extra={"mock_response": GOOD})
    assert result.valid and result.agent == "vuln-triage"
    assert (result.version, result.arm, result.experiment) == (versions.new, None, None)
    assert result.version == result.artifact and not rollout_warnings(caplog)


def test_a_pinned_active_version_serves_even_after_the_definition_changed(versions):
    versions.rollout(f"active: {versions.old[:12]}\n")
    agent = load("vuln-triage", project=versions.tree)
    assert OLD_TEXT in agent.prompt_for(MODEL).system and OLD_TEXT in agent.prompt_for(MODEL, user_id="u").system
    selection = agent.explain(MODEL)
    assert selection.kind == "artifact" and selection.artifact == str(versions_dir(versions.artifact)
                                                                      / f"{versions.old}.yaml")
    assert "is not served" in selection.reason  # the newer compiled artifact waits for an experiment
    result = agent.run(REPORT, model=MODEL, user_id="user-1", extra={"mock_response": GOOD})
    assert (result.version, result.arm, result.experiment) == (versions.old, None, None)


def test_users_get_their_arm_and_the_result_says_which(versions):
    versions.rollout(experiment(versions.old, versions.new[:12]))
    agent = load("vuln-triage", project=versions.tree)
    users = [f"user-{n}" for n in range(40)]
    arms = {user: assign("exp-1", user, 0.5) for user in users}
    assert set(arms.values()) == {"control", "treatment"}
    for user, arm in arms.items():
        system = agent.prompt_for(MODEL, user_id=user).system
        assert (NEW_TEXT in system) == (arm == "treatment") and (OLD_TEXT in system) == (arm == "control")
    for user in users[:6]:
        result = agent.run(REPORT, model=MODEL, user_id=user, extra={"mock_response": GOOD})
        expected = versions.new if arms[user] == "treatment" else versions.old
        assert (result.arm, result.version, result.experiment) == (arms[user], expected, "exp-1")
        assert result.artifact == expected
    anonymous = agent.run(REPORT, model=MODEL, extra={"mock_response": GOOD})
    assert (anonymous.arm, anonymous.version, anonymous.experiment) == (None, versions.old, None)


def test_streaming_and_conversations_keep_the_users_arm(versions):
    versions.rollout(experiment(versions.old, versions.new, share=1.0))
    agent = load("vuln-triage", project=versions.tree)
    streamed = agent.stream(REPORT, MODEL, user_id="user-1", extra={"mock_response": GOOD}).result()
    assert (streamed.arm, streamed.version) == ("treatment", versions.new)
    chat = agent.chat(MODEL, user_id="user-1")
    turn = chat.send(REPORT, extra={"mock_response": GOOD})
    assert (turn.arm, turn.version) == ("treatment", versions.new)
    assert NEW_TEXT in chat.messages[0]["content"] and chat.to_dict()["user_id"] == "user-1"


BROKEN = {
    "invalid YAML": ("active: [unclosed\n", "new", "gpt-4o.rollout.yaml:1"),
    "not a mapping": ("- a\n- b\n", "new", "a rollout file is a mapping"),
    "empty": ("", "new", "a rollout file is a mapping"),
    "no active": ("experiment: {id: e, treatment: {old}, share: 0.5}\n", "new", "active: missing"),
    "unknown active": ("active: 0123456789ab\n", "new", "no version 0123456789ab"),
    "share out of range": (experiment("{old}", "{new}", share=1.5), "old", "experiment.share: 1.5 is out of range"),
    "unknown treatment": (experiment("{old}", "abcdef0123"), "old", "no version abcdef0123"),
    "treatment is active": (experiment("{old}", "{old}"), "old", "the treatment is the active version"),
    "bad metric": (experiment("{old}", "{new}", extra="  metric: happiness\n"), "old", "unknown metric"),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_a_broken_rollout_file_never_breaks_a_call(versions, caplog, case):
    text, served, said = BROKEN[case]
    versions.rollout(text.replace("{old}", versions.old).replace("{new}", versions.new))
    expected = {"old": versions.old, "new": versions.new}[served]
    agent = load("vuln-triage", project=versions.tree)
    with caplog.at_level(logging.WARNING, logger="rosetta.runtime"):
        for user in ("user-1", "user-2", None):
            assert agent.prompt_for(MODEL, user_id=user) is agent.prompt_for(MODEL)
        result = agent.run(REPORT, model=MODEL, user_id="user-1", extra={"mock_response": GOOD})
    assert result.valid and (result.version, result.arm, result.experiment) == (expected, None, None)
    warnings = rollout_warnings(caplog)
    assert len(warnings) == 1 and said in warnings[0], warnings
    assert ("without an experiment" if served == "old" else "as if there were no rollout file") in warnings[0]


def test_an_unknown_setting_is_logged_but_the_experiment_still_runs(versions, caplog):
    versions.rollout(experiment(versions.old, versions.new, share=1.0) + "owner: team-a\n")
    with caplog.at_level(logging.WARNING, logger="rosetta.runtime"):
        selection = load("vuln-triage", project=versions.tree).explain(MODEL, user_id="user-1")
    assert (selection.arm, selection.version) == ("treatment", versions.new)
    (warning,) = rollout_warnings(caplog)
    assert "gpt-4o.rollout.yaml:6:1: owner: unknown setting" in warning and warning.endswith("ignoring only that")


def test_a_tampered_active_version_falls_back_to_the_compiled_artifact(versions, caplog):
    versions.rollout(f"active: {versions.old}\n")
    kept = versions_dir(versions.artifact) / f"{versions.old}.yaml"
    kept.write_text(kept.read_text().replace("critical", "harmless", 1))
    with caplog.at_level(logging.WARNING, logger="rosetta.runtime"):
        selection = load("vuln-triage", project=versions.tree).explain(MODEL, user_id="user-1")
    assert selection.version == versions.new
    assert "does not match its content_sha256" in rollout_warnings(caplog)[0]


def test_strict_mode_refuses_a_broken_rollout_file(versions):
    versions.rollout(experiment(versions.old, versions.new, share=2))
    with pytest.raises(RolloutError, match="experiment.share"):
        load("vuln-triage", project=versions.tree, strict=True).prompt_for(MODEL)
    tuned = variant(versions.tree, delimiter="xml")
    versions.rollout(experiment(tuned, versions.new))
    agent = load("vuln-triage", project=versions.tree, strict=True)
    assert {agent.explain(MODEL, user_id=f"u{n}").version for n in range(20)} == {tuned, versions.new}


def test_strict_mode_serves_no_version_of_an_earlier_definition(versions):
    """Strict serves only what the sources render now: an earlier definition's version cannot be
    rendered again, so pinning it is refused, saying so (without strict it serves, as pinned)."""
    versions.rollout(experiment(versions.old, versions.new))
    with pytest.raises(RolloutError, match="changed since it was compiled") as refused:
        load("vuln-triage", project=versions.tree, strict=True).prompt_for(MODEL, user_id="u")
    assert versions.old in str(refused.value)
    assert load("vuln-triage", project=versions.tree).explain(MODEL).version == versions.old


def test_routing_a_user_imports_nothing_heavy(versions):
    versions.rollout(experiment(versions.old, versions.new))
    code = ("import sys, rosetta; a = rosetta.load('vuln-triage'); "
            "p = [a.prompt_for('openai/gpt-4o', user_id=f'u{n}') for n in range(20)]; "
            "assert len({id(x) for x in p}) == 2; "
            "print(' '.join(m for m in ('pydantic', 'litellm', 'dspy', 'optuna', 'datasets', 'scipy') "
            "if m in sys.modules))")
    output = subprocess.run([sys.executable, "-c", code], cwd=versions.tree, capture_output=True, text=True,
                            check=True)
    assert output.stdout.strip() == ""


def test_a_hand_made_terse_variant_served_strictly_still_says_everything_the_definition_says(versions):
    """Issue 81: a variant whose ``instructions`` knob is the agent's description (the search's terse
    candidate, which strict mode and --check accept as re-renderable) replaced the body's Role
    section, dropping a rubric written there. The knob now replaces only the identity sentence."""
    from rosetta.definition.loader import load_definition
    from rosetta.signature import lower

    signature = lower(load_definition(versions.tree / "signatures" / "vuln-triage.md", root=versions.tree))
    terse = variant(versions.tree, instructions=signature.description)
    versions.rollout(f"active: {terse}\n")
    served = load("vuln-triage", project=versions.tree, strict=True).prompt_for(MODEL)
    assert served.knobs.instructions == signature.description
    body = [line.strip() for section in signature.instructions for line in section.content.splitlines() if line.strip()]
    assert body and [line for line in body if line not in served.system] == []
