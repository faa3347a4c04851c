"""Examples of every credential rule: a planted example and a near miss for every rule of
``secret_rules.toml`` (and for the gitleaks rules that took over from rosetta's own), keyed by rule
id; and, for every rule of ``secret_rules_gitleaks.toml``, examples drawn from gitleaks' own regex.

The planted examples are made up (random characters in each credential's shape) and assembled from
parts, so that no source file holds a string a secret scanner would flag."""

from __future__ import annotations

import random
import re
import zlib
from functools import cache
from re import _constants as sre

from rosetta.runtime.secret_rules import Rule, _load, shannon_entropy

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
    "gitleaks:slack-webhook-url": ("https://hooks.slack" + ".com/services/T0ABCDEFG/B0ABCDEFG/LjzEC87zNR7GQ7CzQhxMwZN6",
                                   "https://hooks.slack.com/services/T0ABC"),
    "anthropic-api-key": ("sk-ant" + "-api03-Xq7Lm2Pz9Rt4Vw8Ky3Bn", "sk-ant-api03"),
    "openai-api-key": ("sk-proj" + "-Hd8Fj2Kl5Mn9Pq3Rs7Tv", "task-Hd8Fj2Kl5Mn9Pq3Rs7Tv"),
    "gitleaks:stripe-access-token": ("sk_" + "live_H2xbxBtzLiWmQheQD30WyNrl", "sk_live_H2xb"),
    "gcp-api-key": ("AIza" + "SyD4f8G2h6J9k3L7m1N5p8Q2r6S9t3V7w1", "AIzaSyD4f8G2h6"),
    "google-oauth-client-secret": ("GOCSPX" + "-wZN6tZl7a9iPRgevtrGZO1Wcbiqq", "GOCSPX-wZN6"),
    "aws-access-token": ("aws_" + "AKIAIOSFODNN7EXAMPLE", "xAKIAIOSFODNN7EXAMPLE"),
    "gitleaks:github-fine-grained-pat": ("github" + "_pat_11ABCDEFG0"
                                         "l1nJviWlr8CuVA5g83ap5KfUOIXyxqmSYqKNE9Z73QvM_kl0J6Vw"
                                         "fdPIyBXabcdefghijklmnopqrstu", "github_pat_short"),
    "gitleaks:github-pat": ("ghp" + "_Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe9Dc8", "ghp_Zx9Yw8Vu7Ts6"),
    "gitlab-pat": ("glpat" + "-oSAZcGQ5UysinzOtDw0SVp", "glpat-oSAZcGQ5"),
    "gitleaks:slack-app-token": ("xapp" + "-1-A0123456789-1234567890123-dcc7z9c47ix7gz0ad080n68dzq", "xapp-1-A0123"),
    "slack-token": ("xoxb" + "-2048-Qw3Er4Ty5Ui6", "xoxb-2048"),
    "gitleaks:huggingface-access-token": ("hf_" + "bWQBIDEjQROzQnMZxdpqAJWbGMubvqfySK",
                                          "hf_hub_download_and_cache_files"),
    "gitleaks:npm-access-token": ("npm_" + "dcc7z9c47ix7gz0ad080n68dzqsmi8ytn4h4", "npm_install_dependencies"),
    "gitleaks:sendgrid-api-token": ("SG." + "oSAZcGQ5UysinzOtDw0SVp.C8BiLpMPElIgxGS6FoilOruevkLf3sz7zeOg2ZZZVdg",
                           "SG.oSAZcGQ5.C8BiLp"),
    "gitleaks:pypi-upload-token": ("pypi-AgEIcHlwaS5vcmc" + "CDQ4ZmU1YTI0LTM3ZDUtNDlhNy1iOGE5LWZlYWRjYWZlMDAxZQACKlsz",
                          "pypi-AgEIcHlwaS5vcmc"),
    "gitleaks:twilio-api-key": ("SK" + "a1b2c3d4e5f60718293a4b5c6d7e8f90", "SKa1b2c3d4e5f6"),
    "discord-bot-token": ("MTA4NzY1NDMyMTA5ODc2NTQz" + ".GkR2aB.q9Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1Ji0Hg9Fe",
                          "MTA4NzY1NDMyMTA5ODc2NTQz.GkR2aB"),
    "gitleaks:discord-client-secret": ('discord_client' + '_secret = "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe"',
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


# -- examples drawn from gitleaks' rules ------------------------------------------------------------

GITLEAKS = tuple(_load("secret_rules_gitleaks.toml"))
"""The rules converted from gitleaks' config, in order (those a rule of rosetta's stands for too)."""
SPACE = " \t\n"
PRINTABLE = "".join(chr(code) for code in range(33, 127)) + SPACE
"""What a class matching (nearly) any character draws from: gitleaks' examples are plain text."""

WRAPPINGS = (
    '{i}Token="{s}"', '{i}Token = "{s}"', "{i}Token={s}", "{i}Token = {s}", '{{\n    "{i}_token": "{s}"\n}}',
    '{{"config.ini": "{I}_TOKEN={s}\\nBACKUP_ENABLED=true"}}', "<{i}Token>\n    {s}\n</{i}Token>",
    "{i}_token: {s}", "{i}_token: '{s}'", '{i}_token: "{s}"', 'string {i}Token = "{s}";',
    'var {i}Token string = "{s}"', '{i}Token := "{s}"', "{i}Token := `{s}`", 'String {i}Token = "{s}";',
    'var {i}Token = "{s}"', '${i}Token .= "{s}"', "{i}Token = '{s}'", '{i}Token = "{s}"',
    'System.setProperty("{I}_TOKEN", "{s}")', '  "{i}Token" => "{s}"', '{i}_TOKEN = "{s}"', '{i}_TOKEN := "{s}"',
    '{i}_TOKEN ::= "{s}"', '{i}_TOKEN :::= "{s}"', '{i}_TOKEN ?= "{s}"',
)
"""The contexts gitleaks' ``utils.GenerateSampleSecrets`` wraps each example in (those it does not
leave as TODO), with ``{i}`` the identifier, ``{I}`` it in capitals and ``{s}`` the example."""


@cache
def _parsed(pattern: str) -> tuple[list, int]:
    tree = re._parser.parse(pattern)  # re has no public API for this
    return list(tree), tree.state.flags


_MEMBERS: dict[tuple[int, bool], str] = {}


def _members(items: list, fold: bool) -> str:
    """The characters of ``PRINTABLE`` a class (its parsed items, kept by ``_parsed``) matches."""
    key = (id(items), fold)
    if key not in _MEMBERS:
        _MEMBERS[key] = _class_members(items, fold)
    return _MEMBERS[key]


def _class_members(items: list, fold: bool) -> str:
    negate = bool(items) and items[0][0] is sre.NEGATE
    categories = {sre.CATEGORY_DIGIT: str.isdigit, sre.CATEGORY_WORD: lambda c: c.isalnum() or c == "_",
                  sre.CATEGORY_SPACE: str.isspace}

    def has(char: str) -> bool:
        for op, arg in items:
            if op is sre.LITERAL and ord(char) == arg or op is sre.RANGE and arg[0] <= ord(char) <= arg[1]:
                return True
            if op is sre.CATEGORY:
                name = str(arg).removeprefix("CATEGORY_NOT_")
                test = categories[getattr(sre, "CATEGORY_" + name.removeprefix("CATEGORY_"))]
                if test(char) != str(arg).startswith("CATEGORY_NOT_"):
                    return True
        return False

    return "".join(c for c in PRINTABLE if (has(c) or fold and (has(c.lower()) or has(c.upper()))) != negate)


def draw(pattern: str, rnd: random.Random) -> str:
    """A random string ``pattern`` may match, drawn as gitleaks' ``secrets.NewSecret`` draws one
    from a regex (a repetition takes a random count, unbounded ones up to 20 more than their least);
    it need not match (an assertion is not drawn for): check it."""
    items, flags = _parsed(pattern)

    def walk(items: list, fold: bool) -> str:
        out = []
        for op, arg in items:
            if op is sre.LITERAL:
                char = chr(arg)
                out.append(rnd.choice((char.lower(), char.upper())) if fold else char)
            elif op is sre.NOT_LITERAL:
                out.append(rnd.choice(PRINTABLE.replace(chr(arg), "")))
            elif op is sre.ANY:
                out.append(rnd.choice(PRINTABLE if flags & re.DOTALL else PRINTABLE.replace("\n", "")))
            elif op is sre.IN:
                out.append(rnd.choice(_members(arg, fold)))
            elif op is sre.BRANCH:
                out.append(walk(list(rnd.choice(arg[1])), fold))
            elif op is sre.SUBPATTERN:
                _, add, remove, body = arg
                out.append(walk(list(body), (fold or bool(add & re.IGNORECASE)) and not remove & re.IGNORECASE))
            elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT):
                low, high, body = arg
                high = low + 20 if high == sre.MAXREPEAT else high
                count = rnd.choice((low, high, rnd.randint(low, high), rnd.randint(low, high)))
                out += [walk(list(body), fold) for _ in range(count)]
            # an assertion (\b, lookaround, ^, $) draws nothing
        return "".join(out)

    return walk(items, bool(flags & re.IGNORECASE))


def gitleaks_findings(rule: Rule, text: str) -> list[tuple[str, str]]:
    """What gitleaks itself reports in ``text`` for ``rule``, as (secret, whole match): its regex's
    matches, each one's ``secretGroup`` or first non-empty group, less those its entropy or
    allowlists reject; nothing unless one of its keywords is somewhere in the text."""
    if rule.keywords and not any(word in text.lower() for word in rule.keywords):
        return []
    pattern, found = re.compile(rule.gitleaks_regex), []
    for match in pattern.finditer(text):
        secret = match["secret"] if "secret" in pattern.groupindex else \
            next((group for group in match.groups() if group), match.group())
        if rule.entropy is not None and shannon_entropy(secret) <= rule.entropy:
            continue
        if not any(_allows(allowlist, secret, match.group()) for allowlist in rule.allowlists):
            found.append((secret, match.group()))
    return found


def _allows(allowlist, secret: str, whole: str) -> bool:
    target = whole if allowlist.target == "match" else secret
    verdicts = ([any(re.search(p, target) for p in allowlist.regexes)] if allowlist.regexes else []) + \
        ([any(word in secret.lower() for word in allowlist.stopwords)] if allowlist.stopwords else [])
    return bool(verdicts) and (all(verdicts) if allowlist.all else any(verdicts))


def core(secret: str) -> str:
    """The part of ``secret`` no redacted text may hold, escaped or not: its longest run of letters
    and digits."""
    return max(re.findall(r"[A-Za-z0-9]+", secret) or [secret], key=len)


@cache
def gitleaks_example(rule_id: str, n: int = 0) -> tuple[str, str]:
    """Example ``n`` of gitleaks rule ``rule_id``, drawn (seeded by the rule id) from its own regex
    until gitleaks itself reports it, alone and in each of ``wrapped``: (text, what no redacted text
    may hold). The text is the drawn match, after the rule's first keyword where the match holds
    none (as gitleaks' own examples put ``facebook`` before a Facebook token). What it must not
    leak is the secret gitleaks reports, or the whole match where the rule redacts it whole (its
    secret group repeats, in microsoft-teams-webhook); it holds a run of 8 letters and digits,
    so a leak of it is told from chance."""
    rule = next(rule for rule in GITLEAKS if rule.id == rule_id)
    rnd = random.Random(zlib.crc32(f"{rule_id}/{n}".encode()))
    for _ in range(500):
        drawn = draw(rule.gitleaks_regex, rnd)
        if not re.fullmatch(rule.gitleaks_regex, drawn):
            continue
        text = drawn if not rule.keywords or any(word in drawn.lower() for word in rule.keywords) else \
            f"{rule.keywords[0]} {drawn}"
        found = gitleaks_findings(rule, text)
        if not found:
            continue
        secret = found[-1][0] if "(?P<secret" in rule.regex else found[-1][1]
        if len(core(secret)) >= 8 and all(any(secret in (s, m) for s, m in gitleaks_findings(rule, other))
                                          for other in wrapped(rule, text)):
            return text, secret
    raise AssertionError(f"{rule_id}: no example gitleaks reports in 500 draws")


def identifier(rule: Rule) -> str:
    """What gitleaks' own examples of ``rule`` name the credential (``stripe`` for a Stripe key)."""
    return rule.id.removeprefix("gitleaks:").split("-")[0].replace("1password", "onepassword")


def wrapped(rule: Rule, example: str) -> list[str]:
    """``example`` in each of gitleaks' contexts, named for ``rule``."""
    name = identifier(rule)
    return [wrapping.format(i=name, I=name.upper(), s=example) for wrapping in WRAPPINGS]
