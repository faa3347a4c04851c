"""PV-005's detector: chain-of-thought instructions to the model, not domain prose about steps or reasoning.

``TABLE`` is shared with ``bench/pv005.py``: sentences shaped like real agent prompt bodies, each labeled
True when it tells the model to reason out loud / before answering.
"""

from __future__ import annotations

import pytest

from rosetta.lint.reasoning import reasoning_instructions

TABLE: list[tuple[str, bool]] = [
    # -- instructions to the model -----------------------------------------------------------
    ("Think step by step before answering.", True),
    ("Let's think step by step.", True),
    ("Let's reason through this before answering.", True),
    ("Show your chain of thought.", True),
    ("Use chain-of-thought reasoning for complex requests.", True),
    ("Reason step by step about the evidence before you give a verdict.", True),
    ("Think it through step by step before you answer.", True),
    ("Walk through your reasoning before recommending a fix.", True),
    ("Explain your reasoning step by step before giving the answer.", True),
    ("Before answering, think carefully about what the user is really asking.", True),
    ("Work through the problem step by step.", True),
    ("Think aloud as you analyze the stack trace.", True),
    ("Write out your thought process before producing the final SQL query.", True),
    ("Break the problem down step by step before responding.", True),
    ("First think, then answer.", True),
    ("Take a deep breath and work on this problem step-by-step.", True),
    ("Always show your work when calculating the totals.", True),
    ("Think through the design step by step before writing any code.", True),
    ("When a request is ambiguous, reason about it out loud before deciding what to do.", True),
    ("Use <thinking> tags to reason through the problem before you respond.", True),
    ("You should think step-by-step about each migration before proposing changes.", True),
    ("Reflect on your answer before responding to the user.", True),
    ("Think carefully and thoroughly before you respond.", True),
    ("Before writing the final report, reason through each finding step by step.", True),
    ("ultrathink: plan the refactor before touching any file.", True),
    ("Let us think about this carefully, one step at a time.", True),
    ("Reason through the problem internally before giving the final answer.", True),
    ("Please think through your approach first, then write the code.", True),
    ("Describe your thought process as you work through the bug.", True),
    ("Reason step-by-step and state any assumptions.", True),
    ("It is important that you think step by step.", True),
    ("Start by thinking through the question step by step, then answer concisely.", True),
    ("Verbalize your reasoning before you commit to a diagnosis.", True),
    ("Apply chain-of-thought reasoning to every security finding before reporting it.", True),
    ("For each ticket, think step by step, then write a step-by-step resolution plan for the customer.", True),
    ("Explain how you arrived at the root cause, step by step, before proposing a fix.", True),
    ("Work step by step through the following checks:", True),
    ("Analyze the question step by step before you write the query.", True),
    ("Reason about trade-offs explicitly before recommending an architecture.", True),
    ("Always think before you act, and describe the plan to the user afterwards.", True),
    # -- domain prose ------------------------------------------------------------------------
    ("Create step-by-step runbooks for each scenario.", False),
    ("Write a step-by-step migration guide.", False),
    ("Provide step-by-step remediation instructions for the user.", False),
    ("You evaluate chain-of-thought prompting techniques.", False),
    ("Guide the user step by step through the installation.", False),
    ("Document each step of the incident.", False),
    ("Stay current with chain-of-thought prompting research.", False),
    ("Help the user think through their options before they decide.", False),
    ("Explain the fix to the developer step by step.", False),
    ("The user thinks through options out loud during the session.", False),
    ("Break down complex features into step-by-step implementation tasks.", False),
    ("Produce a step-by-step rollback procedure.", False),
    ("Include a step-by-step checklist for deployment verification.", False),
    ("Walk the user through the onboarding flow one step at a time.", False),
    ("Encourage developers to think through failure modes before shipping.", False),
    ("Design prompts that use chain-of-thought, few-shot examples and self-consistency.", False),
    ("Teach junior engineers how to reason step by step through a production outage.", False),
    ("Offer a step-by-step walkthrough of the API authentication flow.", False),
    ("Explain chain-of-thought, ReAct and tree-of-thought patterns when asked.", False),
    ("Compare chain-of-thought and few-shot prompting for the user's use case.", False),
    ("Write step-by-step installation instructions in the README.", False),
    ("Outline a step-by-step plan for the database migration.", False),
    ("Review the candidate's reasoning step by step and point out errors.", False),
    ("Ask clarifying questions before answering if the request is ambiguous.", False),
    ("Think about accessibility when designing components.", False),
    ("Consider the performance implications of every query.", False),
    ("The guide should walk readers through setup step by step.", False),
    ("Each step-by-step tutorial must include screenshots.", False),
    ("You specialize in chain-of-thought prompt design for LLM applications.", False),
    ("Follow the step-by-step incident response procedure in the runbook.", False),
    ("Provide clear step-by-step directions so the customer can reset their password.", False),
    ("Reasoning models such as o1 think before they answer, so keep prompts concise.", False),
    ("Help students work through math problems step by step.", False),
    ("Generate step-by-step test cases covering every edge case.", False),
    ("Avoid prompts that ask the model to think step by step when using reasoning models.", False),
    ("Summarize the user's thought process from the interview notes.", False),
    ("Break the release into step-by-step milestones and track progress.", False),
    ("Let's begin with a step-by-step overview of the architecture.", False),
    ("Add 'Let's think step by step' to prompts that need multi-step reasoning.", False),
    ("For this reason, step-by-step onboarding docs are required for every service.", False),
    ("Analyze the logs and summarize the errors step by step for the on-call engineer.", False),
    ("Think like a senior security engineer when reviewing authentication code.", False),
    ("Your role is to help engineers reason step by step about production incidents.", False),
    # -- written separately from the detector, as a check on it ------------------------------------
    ("Think step-by-step before giving your final verdict.", True),
    ("Reason carefully, step by step, about each finding.", True),
    ("Let's work through this methodically before we respond.", True),
    ("Please show your chain-of-thought.", True),
    ("Before you answer, reason about which category fits best.", True),
    ("Walk me through your reasoning.", True),
    ("Take a deep breath and think step by step.", True),
    ("Think out loud as you go.", True),
    ("First think about the problem, then answer.", True),
    ("Use step-by-step reasoning to reach the classification.", True),
    ("Write down your thought process before the JSON.", True),
    ("Break the problem down step by step before replying.", True),
    ("Produce a step-by-step incident response plan.", False),
    ("Provide step-by-step instructions the on-call engineer can follow.", False),
    ("The runbook must be step-by-step and numbered.", False),
    ("Help developers think through failure modes.", False),
    ("Document the chain of thought behind each decision in the ADR template.", False),
    ("Explain each remediation step by step so a junior admin can follow it.", False),
    ("Think of yourself as a senior penetration tester.", False),
    ("Reason codes must be one of: R1, R2, R3.", False),
    ("Outline a step-by-step rollback procedure.", False),
    ("You write step by step tutorials for beginners.", False),
    ("Consider the attacker's perspective when reviewing.", False),
    ("Walk the user through the installation step by step.", False),
]


@pytest.mark.parametrize(("sentence", "is_instruction"), TABLE, ids=[s[:48] for s, _ in TABLE])
def test_sentence_is_classified_as_labeled(sentence: str, is_instruction: bool) -> None:
    found = reasoning_instructions(sentence)
    assert bool(found) is is_instruction, found
    assert all(phrase in sentence for phrase in found)


def test_precision_and_recall_over_the_table() -> None:
    predicted = [(bool(reasoning_instructions(sentence)), label) for sentence, label in TABLE]
    tp = sum(p and t for p, t in predicted)
    fp = sum(p and not t for p, t in predicted)
    fn = sum(t and not p for p, t in predicted)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    assert precision >= 0.95 and recall >= 0.95, (precision, recall)


def test_table_is_balanced() -> None:
    positives = sum(label for _, label in TABLE)
    assert len(TABLE) >= 60 and abs(2 * positives - len(TABLE)) <= len(TABLE) // 10
