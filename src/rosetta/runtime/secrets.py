"""Finding and redacting credentials in text: error messages and logs never carry API keys, and the
``no_secrets_in_output`` guardrail uses the same patterns on model answers."""

from __future__ import annotations

import re

SECRET_PATTERNS: dict[str, re.Pattern[str]] = {
    "private key": re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)"),
    "anthropic key": re.compile(r"\bsk-ant-[A-Za-z0-9_-]{16,}"),
    "openai key": re.compile(r"\bsk-(?:proj-)?[A-Za-z0-9_-]{16,}"),
    "google api key": re.compile(r"\bAIza[0-9A-Za-z_-]{30,}"),
    "aws access key": re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    "github token": re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"),
    "slack token": re.compile(r"\bxox[abpors]-[A-Za-z0-9-]{10,}"),
    "jwt": re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    "bearer token": re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{16,}"),
}
"""Credential shapes, most specific first (an Anthropic key is also an ``sk-`` key)."""


def find_secrets(text: str) -> list[str]:
    """The kinds of credentials found in ``text`` (empty when none)."""
    return [kind for kind, pattern in SECRET_PATTERNS.items() if pattern.search(text)]


def redact(text: str) -> str:
    """``text`` with every credential replaced by ``[redacted <kind>]``."""
    for kind, pattern in SECRET_PATTERNS.items():
        text = pattern.sub(f"[redacted {kind}]", text)
    return text
