"""The catalog checked against the ecosystem it describes: litellm's bundled model map (the version
the lock pins) says which hosted models exist, when their vendors retire them, and which request
parameters they refuse. A catalog that drifts from it fails here, not in a user's first call."""

from __future__ import annotations

import datetime
from importlib import metadata
from pathlib import Path

import pytest

from rosetta.definition import load_many
from rosetta.errors import UsageError
from rosetta.providers.adapter import bundled_adapters
from rosetta.providers.catalog import load_catalog
from rosetta.providers.kinds import StructuredOutput
from rosetta.third_party import import_litellm

CATALOG = load_catalog()
HOSTED = ("anthropic", "openai", "google")  # self-hosted open-weight models are retired by nobody
SIGNATURES = Path(__file__).parents[2] / "signatures"
SERVED = [m for m in CATALOG.models if m.adapter in HOSTED and CATALOG.status(m).state != "retired"]


def _map_entry(model_id: str) -> dict | None:
    litellm = import_litellm()
    for key in (model_id, model_id.split("/", 1)[1]):
        if key in litellm.model_cost:
            return litellm.model_cost[key]
    return None


def test_the_catalog_was_reviewed_against_the_installed_litellm():
    reviewed = CATALOG.reviewed
    assert isinstance(reviewed["date"], datetime.date)
    installed = metadata.version("litellm")
    assert str(reviewed["litellm"]) == installed, (
        f"litellm is now {installed}: review providers/catalog.yaml against its model map (ids, "
        "deprecation dates, sampling parameters, structured output) and update `reviewed`")


@pytest.mark.parametrize("model", SERVED, ids=lambda m: m.id)
def test_every_hosted_model_is_in_litellms_map_with_its_vendors_dates(model):
    """Retired models are exempt: they stay in the catalog for their error message, and the map
    may have dropped them."""
    entry = _map_entry(model.id)
    assert entry is not None, f"{model.id} is not in litellm's model map: retire it (retires:) or fix its id"
    assert entry.get("mode", "chat") == "chat", f"{model.id} is a {entry['mode']} model in litellm's map"
    deprecation = entry.get("deprecation_date")
    recorded = CATALOG.retirements.get(model.id)
    assert (str(recorded.date) if recorded else None) == deprecation, (
        f"{model.id}: litellm's map says deprecation_date {deprecation}; the catalog says "
        f"{recorded.date if recorded else 'none'}")
    assert model.context_window <= entry["max_input_tokens"] and model.max_output <= entry["max_output_tokens"]


@pytest.mark.parametrize("model", SERVED, ids=lambda m: m.id)
def test_request_rules_agree_with_the_vendor_flags_in_litellms_map(model):
    entry = _map_entry(model.id)
    if entry.get("supports_sampling_params") is False:
        assert not model.capabilities.sampling_params, f"{model.id} rejects temperature/top_p"
    if model.adapter == "anthropic":
        mechanism = model.structured_output or bundled_adapters()["anthropic"].structured_output
        if entry.get("supports_native_structured_output"):
            assert mechanism is StructuredOutput.OUTPUT_CONFIG
        else:
            assert mechanism is StructuredOutput.FORCED_TOOL and entry.get("supports_forced_tool_use") is not False
    thinks_by_default = entry.get("supports_adaptive_thinking") and entry.get("supports_sampling_params") is False
    if thinks_by_default:
        assert model.thinking_reserve, f"{model.id} thinks by default: its max_tokens needs a thinking reserve"


@pytest.mark.parametrize("name", ["sonnet", "opus", "haiku", "gpt", "gpt-mini", "gemini-pro", "gemini-flash"])
def test_family_aliases_point_at_models_with_no_retirement_date(name):
    model = CATALOG.resolve(name)
    assert model.id not in CATALOG.retirements, f"{name} → {model.id}, which its vendor retires"


def test_default_targets_and_bundled_preferences_are_current():
    for target in CATALOG.default_targets:
        assert CATALOG.status(CATALOG.resolve(target)).state == "current", target
    for loaded in load_many([SIGNATURES]):
        for name in loaded.definition.spec.portability.model_preferences:
            model = CATALOG.resolve(name)
            assert CATALOG.status(model).state == "current", f"{loaded.definition.name} prefers {name} ({model.id})"


def test_a_retired_model_is_refused_with_its_replacement():
    retired = CATALOG.resolve("anthropic/claude-sonnet-4-20250514")
    with pytest.raises(UsageError) as caught:
        CATALOG.refuse_retired(retired)
    assert "retired on 2026-06-15" in str(caught.value) and "anthropic/claude-sonnet-5-5" in str(caught.value)


def test_every_retirement_says_where_its_date_was_read_and_claude_4_retired_on_2026_06_15():
    """Issue 58: lifecycle dates are the vendors', each with its source, never the review date."""
    assert CATALOG.retirements and all(r.source.strip() for r in CATALOG.retirements.values())
    for name in ("anthropic/claude-sonnet-4-20250514", "anthropic/claude-opus-4-20250514"):
        status = CATALOG.status(CATALOG.resolve(name))
        assert (status.state, str(status.date)) == ("retired", "2026-06-15") and "Anthropic" in status.source
    reviewed = {str(v) for v in CATALOG.reviewed.values()}
    assert not {str(r.date) for r in CATALOG.retirements.values()} & reviewed


def test_a_retirement_on_an_unknown_date_says_so(monkeypatch):
    from rosetta.providers import model_entries

    entry = {"date": "unknown", "replacement": "anthropic/claude-sonnet-5-5", "source": "vendor notice"}
    retirement = model_entries.retirement("x/old", entry)
    assert retirement.date is None
    status = model_entries.Status("retired", retirement.date, retirement.replacement, retirement.source)
    assert status.label == "retired (date unknown)"
    assert status.describe("x/old") == "x/old was retired (date unknown); use anthropic/claude-sonnet-5-5 instead"
    with pytest.raises(ValueError, match="no source"):
        model_entries.retirement("x/old", {"date": "2026-01-01", "replacement": "y"})


def test_status_follows_the_calendar():
    sonnet4 = CATALOG.resolve("anthropic/claude-sonnet-4-20250514")
    assert CATALOG.status(sonnet4, today=datetime.date(2026, 6, 14)).state == "deprecated"
    assert CATALOG.status(sonnet4, today=datetime.date(2026, 6, 15)).state == "retired"
    assert CATALOG.status(CATALOG.resolve("sonnet")).state == "current"
