"""A planted example and a near miss for every rule of ``secret_rules.toml``, keyed by rule id.

The examples are made up (random characters in each credential's shape) and assembled from parts,
so that no source file holds a string a secret scanner would flag."""

from __future__ import annotations

import re

PEM_BODY = "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo"

EXAMPLES: dict[str, tuple[str, str]] = {
    "private-key": ("-----BEGIN RSA PRIVATE " + f"KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----",
                    f"-----BEGIN PUBLIC KEY-----\n{PEM_BODY}\n-----END PUBLIC KEY-----"),
    "gcp-private-key-id": ('"private_key' + '_id": "1276fa52bb4f5eac1bfd6b7512c3b564a34a1ab3"',
                           '"private_key_id": "1276fa52bb4f5eac"'),
    "gcp-client-email": ("rosetta-ci@demo-project-123.iam." + "gserviceaccount.com",
                         "rosetta-ci@demo-project-123.example.com"),
    "aws-secret-access-key": ("aws_secret_access" + "_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                              "aws_region = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    "azure-storage-account-key": (
        "DefaultEndpointsProtocol=https;AccountName=demo;Account" + "Key=B69U6devSqHhvgUD4zDqrSOZhQJtl0X4Ftg59"
        "DSDskemg9YPGEhX1sxzQUy8C9Sw+zMm2iXWjLqZD6ENEy8+2D==;EndpointSuffix=core.windows.net",
        "DefaultEndpointsProtocol=https;AccountName=demo;AccountKey=;EndpointSuffix=core.windows.net"),
    "password-in-url": ("postgres://admin:" + "Tr0ub4dor3x@db.internal:5432/app",
                        "https://db.internal:8443/app@v2"),
    "slack-webhook-url": ("https://hooks.slack" + ".com/services/T0ABCDEFG/B0ABCDEFG/LjzEC87zNR7GQ7CzQhxMwZN6",
                          "https://hooks.slack.com/services/T0ABC"),
    "anthropic-api-key": ("sk-ant" + "-api03-Xq7Lm2Pz9Rt4Vw8Ky3Bn", "sk-ant-api03"),
    "openai-api-key": ("sk-proj" + "-Hd8Fj2Kl5Mn9Pq3Rs7Tv", "task-Hd8Fj2Kl5Mn9Pq3Rs7Tv"),
    "stripe-access-token": ("sk_" + "live_H2xbxBtzLiWmQheQD30WyNrl", "sk_live_H2xb"),
    "gcp-api-key": ("AIza" + "SyD4f8G2h6J9k3L7m1N5p8Q2r6S9t3V7w1", "AIzaSyD4f8G2h6"),
    "google-oauth-client-secret": ("GOCSPX" + "-wZN6tZl7a9iPRgevtrGZO1Wcbiqq", "GOCSPX-wZN6"),
    "aws-access-token": ("aws_" + "AKIAIOSFODNN7EXAMPLE", "xAKIAIOSFODNN7EXAMPLE"),
    "github-fine-grained-pat": ("github" + "_pat_11ABCDEFG0" + "l1nJviWlr8CuVA5g83ap5KfUOIXyxqmSYqKNE9Z73QvM_kl0J6Vw"
                                "fdPIyBXabcdefghijklmnopqrstu", "github_pat_short"),
    "github-token": ("ghp" + "_Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe9Dc8", "ghp_Zx9Yw8Vu7Ts6"),
    "gitlab-pat": ("glpat" + "-oSAZcGQ5UysinzOtDw0SVp", "glpat-oSAZcGQ5"),
    "slack-app-token": ("xapp" + "-1-A0123456789-1234567890123-dcc7z9c47ix7gz0ad080n68dzq", "xapp-1-A0123"),
    "slack-token": ("xoxb" + "-2048-Qw3Er4Ty5Ui6", "xoxb-2048"),
    "huggingface-access-token": ("hf_" + "bWQBIDEjQROzQnMZxdpqAJWbGMubvqfySK", "hf_hub_download_and_cache_files"),
    "npm-access-token": ("npm_" + "dcc7z9c47ix7gz0ad080n68dzqsmi8ytn4h4", "npm_install_dependencies"),
    "sendgrid-api-token": ("SG." + "oSAZcGQ5UysinzOtDw0SVp.C8BiLpMPElIgxGS6FoilOruevkLf3sz7zeOg2ZZZVdg",
                           "SG.oSAZcGQ5.C8BiLp"),
    "pypi-upload-token": ("pypi-AgEIcHlwaS5vcmc" + "CDQ4ZmU1YTI0LTM3ZDUtNDlhNy1iOGE5LWZlYWRjYWZlMDAxZQACKlsz",
                          "pypi-AgEIcHlwaS5vcmc"),
    "twilio-api-key": ("SK" + "a1b2c3d4e5f60718293a4b5c6d7e8f90", "SKa1b2c3d4e5f6"),
    "discord-bot-token": ("MTA4NzY1NDMyMTA5ODc2NTQz" + ".GkR2aB.q9Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1Ji0Hg9Fe",
                          "MTA4NzY1NDMyMTA5ODc2NTQz.GkR2aB"),
    "discord-api-token": ('discord_client' + '_secret = "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe"',
                          'discord_channel = "general"'),
    "password-assignment": ('db.connect(pass' + 'word="Hunter2rosettaX")', 'password = "${DB_PASSWORD}"'),
    "jwt": ("eyJhbGciOiJIUzI1NiJ9" + ".eyJzdWIiOiIxMjM0NTY3ODkwIn0.Sfl2KxwRJSMeKKF2QT4fwpMeJf36POk6yJV",
            "eyJhbGciOiJIUzI1NiJ9"),
    "bearer-token": ("Bearer " + "Mz8Nq2Rw6Tx4Vy7Zb3Cd5", "bearer of bad news"),
}
"""rule id → (a credential the rule must find, a look-alike it must not)."""


def secret_part(rule_id: str, planted: str) -> str:
    """The part of ``planted`` that no redacted text may contain: its longest run of letters and
    digits (for a password in a URL, the password itself)."""
    if rule_id == "password-in-url":
        return "Tr0ub4dor3x"
    return max(re.findall(r"[A-Za-z0-9]+", planted), key=len)
