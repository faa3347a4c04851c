"""Fake cloud credentials that make litellm's cloud routes sign real requests to a
tests/vendor_recorder.py server, offline.

Bedrock signs with SigV4 from fake AWS keys (nothing checks the signature, so any key signs).
Vertex AI needs an OAuth access token: a service-account file, with a key generated here, names
the recorder's ``/token`` as its ``token_uri``, so google-auth's JWT bearer grant goes there and
the token it gets back signs the Vertex request (google-auth ignores ``token_uri`` for
``authorized_user`` files, which is why this is a service account). Every other host takes a fake
API key from its environment variable. :func:`cloud_env` sets all of it up through a
``MonkeyPatch``, so a test's ``monkeypatch`` (or ``pytest.MonkeyPatch.context()``) undoes it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from vendor_recorder import VendorRecorder

AWS_REGION = "us-east-1"
AWS_KEY_ID = "AKIDRECORDEREXAMPLE"
VERTEX_PROJECT = "rosetta-recorded"
VERTEX_LOCATION = "us-east5"
"""A region that serves both Gemini and Claude on Vertex AI."""
AZURE_API_VERSION = "2024-10-21"
FAKE_KEY = "test-not-a-real-key"

KEY_VARIABLES: dict[str, str] = {
    "azure": "AZURE_API_KEY",
    "azure_ai": "AZURE_AI_API_KEY",
    "groq": "GROQ_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
    "mistral": "MISTRAL_API_KEY",
    "together_ai": "TOGETHERAI_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "xai": "XAI_API_KEY",
    "fireworks_ai": "FIREWORKS_AI_API_KEY",
}
"""The environment variable litellm reads each key-based host's API key from."""
API_PATHS: dict[str, str] = {
    "bedrock": "",  # litellm appends /model/{id}/converse
    "vertex_ai": "",  # an empty path: litellm grafts /v1/projects/{project}/locations/{location}/... on
    "azure": "",  # litellm appends /openai/deployments/{deployment}/chat/completions
    "azure_ai": "/v1",  # Claude: litellm appends /anthropic/v1/messages
    **{host: "/v1" for host in ("groq", "openrouter", "mistral", "together_ai", "deepseek", "xai", "fireworks_ai")},
}
"""Per litellm provider, what follows the recorder's root in ``api_base``."""
DISTRACTIONS = (
    "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_BEARER_TOKEN_BEDROCK", "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "GEMINI_API_KEY", "GOOGLE_API_KEY", "VERTEXAI_API_BASE", "AZURE_AD_TOKEN", "AZURE_API_BASE",
    "AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET", "AZURE_TENANT_ID",
)
"""The developer's own settings that would make a route sign another way or go elsewhere."""


@dataclass(frozen=True)
class CloudCredentials:
    """What :func:`cloud_env` set up: the service-account file and the PEM public key that checks
    the JWT assertions signed with its private key."""

    service_account: Path
    public_key_pem: bytes
    client_email: str


def cloud_env(recorder: VendorRecorder, monkeypatch: pytest.MonkeyPatch, folder: Path) -> CloudCredentials:
    """Set fake AWS keys and region, a Vertex AI service account (written in ``folder``) whose
    token endpoint is ``recorder``, the Vertex project and location, Azure's API version, and a
    fake key for every key-based host; clear the settings that would override them."""
    for name in DISTRACTIONS:
        monkeypatch.delenv(name, raising=False)
    # botocore reads ~/.aws and asks the instance metadata service when it lacks keys: neither here
    monkeypatch.setenv("AWS_CONFIG_FILE", str(folder / "aws-config-absent"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(folder / "aws-credentials-absent"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", AWS_KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", FAKE_KEY)
    monkeypatch.setenv("AWS_REGION_NAME", AWS_REGION)

    path, public_key, email = _write_service_account(folder / "vertex-service-account.json", recorder.token_uri)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(path))
    # litellm caches Vertex credentials per process, keyed by (VERTEXAI_CREDENTIALS, project): naming
    # this test's file keeps a later recorder from receiving a token an earlier one granted
    monkeypatch.setenv("VERTEXAI_CREDENTIALS", str(path))
    monkeypatch.setenv("VERTEXAI_PROJECT", VERTEX_PROJECT)
    monkeypatch.setenv("VERTEXAI_LOCATION", VERTEX_LOCATION)

    monkeypatch.setenv("AZURE_API_VERSION", AZURE_API_VERSION)
    for variable in KEY_VARIABLES.values():
        monkeypatch.setenv(variable, FAKE_KEY)
    return CloudCredentials(path, public_key, email)


def api_base_for(model_id: str, recorder: VendorRecorder) -> str:
    """The ``api_base`` that makes litellm's route for ``model_id`` (``provider/model``) hit ``recorder``."""
    provider = model_id.split("/", 1)[0]
    if provider not in API_PATHS:
        raise ValueError(f"no recorder route for provider `{provider}` (from {model_id!r}); "
                         f"known: {', '.join(sorted(API_PATHS))}")
    return recorder.root + API_PATHS[provider]


def _write_service_account(path: Path, token_uri: str) -> tuple[Path, bytes, str]:
    """A service-account key file with a fresh RSA key, in the format the Cloud console downloads."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    email = f"recorder@{VERTEX_PROJECT}.iam.gserviceaccount.com"
    path.write_text(json.dumps({
        "type": "service_account", "project_id": VERTEX_PROJECT, "private_key_id": "recorder-key",
        "private_key": key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                         serialization.NoEncryption()).decode(),
        "client_email": email, "client_id": "100000000000000000000", "token_uri": token_uri,
    }), encoding="utf-8")
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return path, public, email
