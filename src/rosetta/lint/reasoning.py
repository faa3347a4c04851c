"""Find hard-coded chain-of-thought instructions in a prompt body (PV-005).

A phrase list does not work: "step-by-step", "think through" and "chain of thought" are ordinary
domain words too ("write a step-by-step migration guide", "help the user think through options",
"you evaluate chain-of-thought prompting"). The rule is about *who reasons and how*: text is an
instruction when it tells the model to reason visibly or before it answers. That is one of

1. a reasoning verb addressed to the model (think, reason, reflect on, work step by step; or work
   through, break down, solve, analyze, approach, consider *the problem / question / task*), plus a
   qualifier in the same clause: stepwise as an adverb ("step by step", "in a step-by-step way",
   "one step at a time"), out loud ("aloud", "in a scratchpad", "in <thinking> tags"), before the
   answer ("before answering", "before writing code", "then answer", "first"), or "think hard" /
   "ultrathink";
2. the idiom "let's think / reason / work this out";
3. a verb that uses or displays the model's reasoning: "use / show / write out / apply
   chain-of-thought | step-by-step reasoning | your thought process", "show / explain / walk
   through your reasoning", "show your work", "explain how you arrived at ...".

Not instructions, so not flagged:

* "step-by-step" before a noun (runbook, guide, plan, instructions): what the reader receives;
* a verb that is not a reasoning verb, whatever its qualifier: "guide the user step by step",
  "explain the fix to the developer step by step" ask for an output shaped for someone, not for
  the model to reason out loud (only "your reasoning / thought process" makes "explain" count);
* a reasoning verb with another subject ("help the user think", "teach engineers how to reason",
  "ask the model to think step by step", "the user thinks") or used as a noun ("the reason",
  "the candidate's reasoning");
* chain of thought as a topic ("chain-of-thought prompting", "... techniques", "explain
  chain-of-thought") or in a relative clause ("prompts that use chain-of-thought");
* anything inside quotes or backticks: mentioned, not said.

A reasoning verb with no qualifier ("think about accessibility") is ordinary guidance.
"""

from __future__ import annotations

import re

_FLAGS = re.IGNORECASE | re.MULTILINE
_CLAUSE = r"[^.;!?\n]"
_FUNCTION_WORDS = (r"about|after|and|as|at|before|but|each|every|first|for|from|here|if|in|internally|into|like|on|"
                   r"or|over|prior|rather|so|then|this|through|to|until|when|whenever|while|with|without|yourself")
_STEPWISE = (r"(?:in\s+(?:a\s+)?)?step[- ]by[- ]step(?:\s+(?:way|manner|fashion)\b"
             rf"|(?=\s*$|\s*[^\w\s]|\s+(?:{_FUNCTION_WORDS})\b))|one\s+step\s+at\s+a\s+time\b")
_ALOUD = (r"(?:aloud|out\s+loud)\b|(?:in|inside|within|using)\s+(?:a\s+|an\s+|the\s+|your\s+)?"
          r"(?:<\w+>|scratch\s?pad\b|thinking\s+(?:tags?|block|section)\b)")
_ANSWER = (r"(?:final\s+)?(?:answers?|responses?|reply|replies|output|verdict|conclusions?|decision|"
           r"recommendations?|solution|code)")
_BEFORE = (r"(?:before|prior\s+to)\s+(?:you\s+|it\s+)?(?:answer(?:ing)?|respond(?:ing)?|repl(?:y|ying)"
           r"|conclud(?:e|ing)|decid(?:e|ing)|act(?:ing)?|proceed(?:ing)?|jump(?:ing)?\s+to|speak(?:ing)?"
           r"|recommend(?:ing)?|suggest(?:ing)?|cod(?:e|ing)|implement(?:ing)?"
           r"|(?:(?:giv|provid|writ|produc|return|output|stat|mak|generat|offer|commit)\w*\s+)?"
           rf"(?:(?:the|your|a|an|any)\s+)?{_ANSWER})\b")
_THEN = (r"then\s+(?:(?:giv|provid|writ|stat|output)\w*\s+)?(?:(?:the|your|a)\s+)?"
         rf"(?:answer|respond|reply|conclude|decide|act|{_ANSWER})\b")
_QUALIFIER = rf"(?:{_STEPWISE}|{_ALOUD}|{_BEFORE}|{_THEN})"
_OBJECT = (r"(?:(?:the|this|that|each|every|your|a)\s+)?"
           r"(?:problems?|questions?|tasks?|query|request|puzzle|reasoning|logic|solution|answer|it|this|things)")
_VERB = (r"(?<![<\w-])(?P<verb>think(?:ing)?|reason(?:ing)?|reflect(?:ing)?\s+on"
         rf"|work(?:ing)?\s+(?:(?:through|on|out)\s+{_OBJECT}|(?:it|this|things)\s+(?:out|through)"
         r"|(?=(?:in\s+a\s+)?step[- ]by[- ]step|one\s+step))"
         rf"|break(?:ing)?\s+(?:down\s+{_OBJECT}|{_OBJECT}\s+down)"
         rf"|(?:solv(?:e|ing)|analy[sz](?:e|ing)|approach(?:ing)?|tackl(?:e|ing)|consider(?:ing)?)\s+{_OBJECT})\b")
_USE = (r"use|using|apply|applying|employ|employing|follow|following|show|showing|write|writing|write\s+(?:out|down)|"
        r"output|include|including|provide|providing|give|giving|produce|generate|perform|do|engage\s+in|reveal|"
        r"display|share|verbalize|articulate|narrate|lay\s+out|spell\s+out|(?:walk|talk)\s+(?:me\s+|us\s+)?through")
_SHOW = (r"show|showing|explain|explaining|describe|describing|outline|write\s+out|writing\s+out|lay\s+out|"
         r"spell\s+out|share|reveal|verbalize|articulate|narrate|(?:walk|talk)\s+(?:me\s+|us\s+)?through")
_REASONING_NOUN = (r"(?:chain[- ]of[- ]thoughts?|thought\s+process(?:es)?|thinking\s+process"
                   r"|reasoning\s+(?:process|steps|trace)|step[- ]by[- ]step\s+(?:reasoning|thinking|thought|logic)"
                   r"|inner\s+monologue)\b")
_TOPIC = (r"(?!\s+(?:prompting|prompts?|research|techniques?|papers?|methods?|literature|stud(?:y|ies)|benchmarks?"
          r"|datasets?|examples?|templates?|patterns?|strategies|frameworks?|approaches|evaluations?)\b)")
_FILLER = r"(?:(?:out|your|the|a|an|full|complete|explicit|detailed|clear|brief|own|entire|visible|all|of)\s+){0,4}"

_PATTERNS = [  # (pattern, whether the verb must be addressed to the model)
    (re.compile(rf"\b{_VERB}{_CLAUSE}{{0,80}}?\b{_QUALIFIER}", _FLAGS), True),
    (re.compile(rf"\b{_BEFORE}{_CLAUSE}{{0,40}}?\b{_VERB}", _FLAGS), True),
    (re.compile(rf"\bfirst,?\s+(?:you\s+(?:should|must)\s+)?{_VERB}", _FLAGS), True),
    (re.compile(rf"\b{_VERB}(?:\s+\w+){{0,4}}?\s+first\b", _FLAGS), True),
    (re.compile(r"\bultrathink\b|\b(?P<verb>think)\s+(?:(?:very|really)\s+)?hard(?:er|est)?\b", _FLAGS), True),
    (re.compile(rf"\blet(?:['’]?s|\s+us)\s+(?:(?:first|now|carefully)\s+)?(?:{_VERB}|go\s+step[- ]by[- ]step)",
                _FLAGS), False),
    (re.compile(rf"\b(?P<verb>{_USE})\s+{_FILLER}{_REASONING_NOUN}{_TOPIC}", _FLAGS), True),
    (re.compile(rf"\b(?P<verb>{_SHOW})\s+(?:(?:out|all|of)\s+)?your\s+(?:own\s+)?"
                rf"(?:reasoning|thinking|logic|work(?:ing)?|{_REASONING_NOUN})"
                rf"|\b(?P<how>{_SHOW})\s+(?:\w+\s+){{0,3}}?how\s+you\s+(?:arrived|reached|got|came)\b", _FLAGS), True),
]

_PEOPLE = (r"users?|customers?|clients?|readers?|learners?|students?|developers?|engineers?|teams?|members?|people|"
           r"persons?|humans?|stakeholders?|operators?|callers?|candidates?|colleagues?|participants?|beginners?|"
           r"models?|llms?|them|they|he|she|someone|everyone|others")
_NOT_ADDRESSED = re.compile(  # what may precede a verb that someone else is to carry out, or a noun
    rf"(?:\b(?:{_PEOPLE})(?:['’]s|s['’])?|\b(?:how|help\w*|teach\w*|coach\w*|encourag\w*|ask\w*|let|get"
    r"|guid\w*|invit\w*|remind\w*|allow\w*|enabl\w*|lead\w*|train\w*))(?:\s+\w+){0,2}\s+$"
    r"|\b(?:the|a|an|this|that|which|who|your|my|their|our|its|his|her|no|one|any|some|critical"
    r"|\w+(?<!\blet)['’]s)\s+$",
    re.IGNORECASE,
)
_QUOTED = re.compile(  # "…", “…”, `…` and '…' (apostrophes inside words allowed): mentioned, not said
    r"\"[^\"\n]*\"|“[^”\n]*”|`[^`\n]*`|(?<!\w)['‘](?:[^'‘’\n]|(?<=\w)['’](?=\w))*['’](?!\w)"
)


_ANY_CUE = re.compile(r"think|reason|reflect|work|break|solv|analy[sz]|approach|tackl|consider|thought|step|monolog"
                      r"|logic|how\s+you|let", re.IGNORECASE)
"""A word every pattern needs (its verbs, its reasoning nouns, "let's"): text with none of them
holds no instruction, and is not searched by the eight patterns (most lines of a body)."""


def reasoning_instructions(text: str) -> list[str]:
    """The phrases of ``text``, as written, that tell the model to reason out loud or before answering."""
    if not _ANY_CUE.search(text):
        return []
    masked = _QUOTED.sub(lambda m: " " * len(m.group()), text)
    spans: list[tuple[int, int]] = []
    for pattern, addressed in _PATTERNS:
        position = 0
        while match := pattern.search(masked, position):
            verb = next((match.start(g) for g in ("verb", "how") if g in pattern.groupindex and match.group(g)), -1)
            if addressed and verb >= 0 and _NOT_ADDRESSED.search(masked, max(0, verb - 80), verb):
                position = match.start() + 1
                continue
            spans.append(match.span())
            position = match.end()
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [text[start:end] for start, end in merged]
