"""DSPy interop (issue 59): the instructions ``to_dspy()`` hands DSPy leave the answer's format to
DSPy's own fields when there is an output schema, keep each section's title, and name the role with
its article; ``output_from_dspy`` validates a prediction against the agent's output schema."""

from __future__ import annotations

import json
import re

import pytest
from conftest import REPO

from rosetta.definition import load_definition
from rosetta.errors import UsageError
from rosetta.signature import lower

FORMAT_PROSE = "Return one JSON object with category and confidence. No prose outside the object."

JSON_AGENT = """\
    ---
    name: ticket-router
    identity:
      role: ROLE
    inputs: {ticket: {type: string, description: The customer's ticket.}}
    output:
      schema:
        type: object
        properties:
          category: {type: string, enum: [billing, shipping, refund_request],
                     description: Which queue handles the ticket.}
          confidence: {type: number, minimum: 0, maximum: 1, description: How sure the routing is.}
        required: [category, confidence]
    ---
    Route support tickets for a web shop.

    ## Context
    Tickets arrive in English and German.

    ## Constraints
    - Pick exactly one category.

    ## Output format
    FORMAT_PROSE
    """

FREE_TEXT_AGENT = """\
    ---
    name: note-writer
    identity:
      role: Release Note Writer
    ---
    ## Constraints
    - Mention every breaking change.

    ## Output format
    Three markdown bullet points, most important first.
    """


def _router(write, role: str = "Ticket Router"):
    text = JSON_AGENT.replace("ROLE", json.dumps(role)).replace("FORMAT_PROSE", FORMAT_PROSE)
    return lower(load_definition(write("router.md", text)))


def test_a_json_agent_s_instructions_leave_the_format_to_dspy_and_keep_section_titles(write):
    signature = _router(write)
    assert [(s.title, s.role.value) for s in signature.instructions][-1] == ("Output format", "format")
    instructions = signature.dspy_instructions()
    assert FORMAT_PROSE not in instructions and "Output format" not in instructions
    assert "JSON" not in instructions and "No prose outside" not in instructions
    assert "Context:\nTickets arrive in English and German." in instructions
    assert "Constraints:\n- Pick exactly one category." in instructions
    # the text before the first heading has no title, and stays untitled, right after the role sentence
    assert instructions.startswith("You are a Ticket Router.\n\nRoute support tickets for a web shop.\n\nContext:")


def test_the_bundled_json_agents_lose_their_output_format_prose_but_keep_their_headings():
    for agent in ("vuln-triage", "log-summarizer-open", "news-topic"):
        signature = lower(load_definition(REPO / "signatures" / f"{agent}.md"))
        instructions = signature.dspy_instructions()
        formats = [s for s in signature.instructions if s.role.value == "format"]
        assert formats and all(s.content.strip() not in instructions for s in formats), agent
        assert not re.search(r"(Return|Reply with) (a|one) JSON object", instructions), agent
        titled = [s for s in signature.instructions if s.title and s.role.value != "format"]
        assert titled and all(f"{s.title}:\n" in instructions for s in titled), agent
    triage = lower(load_definition(REPO / "signatures" / "vuln-triage.md")).dspy_instructions()
    assert triage.startswith("You are a Vulnerability Triage Analyst. Expertise: ")
    assert "Severity rubric:\n" in triage and "Decision rules:\n" in triage and "Constraints:\n" in triage


def test_a_free_text_agent_keeps_its_format_section_its_only_description_of_the_answer(write):
    signature = lower(load_definition(write("notes.md", FREE_TEXT_AGENT)))
    assert signature.output_schema is None
    instructions = signature.dspy_instructions()
    assert "Output format:\nThree markdown bullet points, most important first." in instructions
    assert instructions.startswith("You are a Release Note Writer.\n\nConstraints:\n- Mention every breaking change.")


def test_dspy_s_own_adapters_show_the_titled_instructions_without_the_json_prose(write):
    import dspy

    dspy_signature = _router(write).to_dspy()
    for adapter in (dspy.ChatAdapter(), dspy.JSONAdapter()):
        system = adapter.format(dspy_signature, demos=[], inputs={"ticket": "Where is my parcel?"})[0]["content"]
        assert "You are a Ticket Router." in system and "Constraints:" in system
        assert FORMAT_PROSE not in system and "No prose outside" not in system


@pytest.mark.parametrize("role, sentence", [
    ("Vulnerability Triage Analyst", "You are a Vulnerability Triage Analyst."),
    ("Incident Responder", "You are an Incident Responder."),
    ("escalation engineer", "You are an escalation engineer."),
    ("the on-call lead", "You are the on-call lead."),
    ("an Auditor", "You are an Auditor."),
    ("A Reviewer", "You are A Reviewer."),  # kept as written: it starts with its article
    ("Your pairing partner", "You are Your pairing partner."),
    ("our release manager", "You are our release manager."),
    ("Triage Analyst.", "You are a Triage Analyst."),  # no doubled period
    ("Helper!", "You are a Helper!"),
])
def test_the_role_sentence_has_its_article_and_one_period(write, role, sentence):
    instructions = _router(write, role=role).dspy_instructions()
    assert instructions.startswith(sentence + "\n\n")
    assert ".." not in instructions.split("\n", 1)[0]


def test_output_from_dspy_refuses_a_prediction_outside_the_schema_naming_each_field(write):
    import dspy

    signature = _router(write)
    prediction = dspy.Prediction(category="refunds", confidence=7)
    with pytest.raises(UsageError) as caught:
        signature.output_from_dspy(prediction)
    problems = {p.field: p for p in caught.value.problems if p.field}
    assert set(problems) == {"category", "confidence"}
    assert problems["category"].message == 'breaks the schema\'s \'enum\': ["billing", "shipping", "refund_request"]'
    assert problems["confidence"].message == "breaks the schema's 'maximum': 1"
    assert "refunds" not in str(caught.value)  # what the model wrote is never quoted (it may hold a secret)
    text = str(caught.value)
    assert "ticket-router: the DSPy prediction does not fit the agent's output schema" in text
    assert "validate=False" in text  # the hint says how to read it anyway
    # the same check, without raising, for a caller that scores many predictions
    assert [p.field for p in signature.dspy_output_problems(prediction)] == ["category", "confidence"]
    assert signature.output_from_dspy(prediction, validate=False) == {"category": "refunds", "confidence": 7}


def test_a_prediction_dspy_parsed_from_a_model_answer_is_validated_too(write):
    """DSPy's ChatAdapter parses ``confidence`` as a float and lets 7.0 through: rosetta does not."""
    import dspy

    signature = _router(write)
    completion = "[[ ## category ## ]]\nbilling\n\n[[ ## confidence ## ]]\n7\n\n[[ ## completed ## ]]"
    parsed = dspy.ChatAdapter().parse(signature.to_dspy(), completion)
    prediction = dspy.Prediction(**parsed)
    assert prediction.confidence == 7.0
    with pytest.raises(UsageError, match=r"confidence: breaks the schema's 'maximum': 1"):
        signature.output_from_dspy(prediction)
    good = dspy.ChatAdapter().parse(signature.to_dspy(), completion.replace("\n7\n", "\n0.75\n"))
    assert signature.output_from_dspy(dspy.Prediction(**good)) == {"category": "billing", "confidence": 0.75}


def test_a_missing_required_field_is_named(write):
    import dspy

    with pytest.raises(UsageError) as caught:
        _router(write).output_from_dspy(dspy.Prediction(category="billing"))
    (problem,) = [p for p in caught.value.problems if p.field]
    assert problem.field == "confidence" and problem.message == "breaks the schema's 'type': \"number\""


def test_valid_predictions_and_examples_round_trip(write):
    import dspy

    signature = _router(write)
    output = {"category": "refund_request", "confidence": 0.9}
    example = signature.dspy_example({"ticket": "I want my money back"}, output)
    assert signature.output_from_dspy(example) == output
    assert signature.dspy_output_problems(example) == []
    assert signature.output_from_dspy(dspy.Prediction(**output)) == output
    assert signature.output_from_dspy(dspy.Prediction(category="billing", confidence=0)) == {
        "category": "billing", "confidence": 0}


def test_free_text_agents_are_not_validated(write):
    import dspy

    signature = lower(load_definition(write("notes.md", FREE_TEXT_AGENT)))
    prediction = dspy.Prediction(answer="- one\n- two")
    assert signature.output_from_dspy(prediction) == "- one\n- two"
    assert signature.dspy_output_problems(prediction) == []


def test_problems_name_nested_fields_by_path(write):
    import dspy

    signature = lower(load_definition(write("nested.md", """\
        ---
        name: nested
        output:
          schema:
            type: object
            properties:
              items:
                type: array
                items: {type: object, properties: {name: {type: string, maxLength: 5}}, required: [name]}
            required: [items]
        ---
        body
        """)))
    with pytest.raises(UsageError) as caught:
        signature.output_from_dspy(dspy.Prediction(items=[{"name": "ok"}, {"name": "far too long"}, {}]))
    problems = {p.field: p for p in caught.value.problems if p.field}
    assert set(problems) == {"items[1].name", "items[2]"}
    assert problems["items[1].name"].message == "breaks the schema's 'maxLength': 5"
    assert problems["items[2]"].message == "is missing a required field ('name')"
