"""Issue 56: both embedded models answer every bundled agent offline, through the runtime (the
model's own artifact where it has one, else the fallback). The one way an agent may go unanswered
is its own declared need: a ``minimum_context_window`` larger than the model's, refused before any
call, with both windows named."""

from __future__ import annotations

import jsonschema
import pytest
from conftest import LOCAL_MODELS, REPO, sample_inputs

import rosetta
from rosetta.definition import load_many
from rosetta.definition.loader import load_definition
from rosetta.errors import RosettaError
from rosetta.providers.catalog import load_catalog
from rosetta.runtime.result import ModelCallError
from rosetta.signature import lower

BENCH = {"question-type", "news-topic", "vuln-triage", "leak-detector"}
"""The agents with an optimized artifact for each embedded model (a small model's answer to the
others may break their contract, e.g. run out of tokens inside a long JSON list: answered, not valid)."""
DEFINITIONS = {r.definition.name: r.path for r in load_many([REPO / "signatures"]) if r.definition is not None}


@pytest.mark.parametrize("model", LOCAL_MODELS)
def test_each_embedded_model_answers_every_bundled_agent(local_model: str, model: str) -> None:
    window = load_catalog().resolve(model).context_window
    answered, refused = [], []
    for name, path in sorted(DEFINITIONS.items()):
        agent = rosetta.load(name, project=REPO)
        inputs, signature = sample_inputs(path, REPO), lower(load_definition(path, root=REPO))
        needs = signature.minimum_context_window
        if needs and needs > window:
            with pytest.raises(RosettaError, match=f"{needs:,}-token context window.*{window:,}"):
                agent.run(inputs, model=model)
            refused.append(name)
            continue
        # an agent without an artifact for this model gets no correction retry and 32 tokens: its
        # answer is checked for being there, not for keeping a contract a small model was never
        # tuned to (corrections are tests/runtime's business), and its 1,024-token rambling takes
        # half a minute a try
        unbound = {} if name in BENCH else {"validation_retries": 0, "overrides": {"max_tokens": 32}}
        try:
            result = agent.run(inputs, model=model, **unbound)
        except ModelCallError as error:  # answered, never within the contract, and the definition says halt
            assert name not in BENCH and "the answer never validated" in str(error), (name, error)
            answered.append(name)
            continue
        assert result.model == model and result.raw.strip(), (name, result.attempts)
        if name in BENCH:  # optimized for this model: the answer keeps the output contract
            assert result.valid, (name, result.attempts)
            jsonschema.validate(result.data, signature.output_schema)
        answered.append(name)
    assert BENCH <= set(answered)
    assert len(answered) + len(refused) == len(DEFINITIONS) >= 12
