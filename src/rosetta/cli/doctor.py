"""``rosetta doctor``: provider credentials (never printed), the endpoints of the project's declared
models (reachable or not), the local model runtime and weights, the installed litellm release, and
compiled artifacts for models their vendors retire."""

from __future__ import annotations

from pathlib import Path

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from rosetta.cli.common import out, project_settings, reports_errors
from rosetta.errors import RosettaError

KNOWN_BAD_LITELLM = {"1.82.7", "1.82.8"}
"""litellm releases that were malicious uploads."""


@reports_errors
def doctor(ctx: typer.Context) -> None:
    """Check the environment: provider credentials (never printed), local model, litellm version,
    and artifacts compiled for retired or deprecated models."""
    import importlib.metadata
    import importlib.util

    from rosetta.providers.catalog import catalog_for
    from rosetta.providers.litellm_offline import import_litellm

    settings = project_settings(ctx)
    catalog = catalog_for(settings.root, settings.models)
    litellm = import_litellm()
    table = Table(title="providers", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("Provider", "Example model", "Credentials"):
        table.add_column(column)
    seen: set[str] = set()
    for model in catalog.models:
        if model.provider in seen or model.provider == "local" or model.endpoint is not None:
            continue
        seen.add(model.provider)
        try:
            check = litellm.validate_environment(model=model.id)
        except Exception as exc:  # noqa: BLE001  an odd provider must not break the report
            check = {"keys_in_environment": False, "missing_keys": [type(exc).__name__]}
        missing = check.get("missing_keys") or []
        if check.get("keys_in_environment"):
            status = "[green]set[/green]"
        elif missing and all(key.endswith("_API_BASE") for key in missing):  # a URL, not a credential (Ollama)
            status = f"[dim]none needed; the default endpoint unless {escape(', '.join(missing))} is set[/dim]"
        else:
            status = f"[yellow]missing {escape(', '.join(missing))}[/yellow]" if missing else "[dim]none needed[/dim]"
        table.add_row(model.provider, model.id, status)
    out.print(table)
    _declared_endpoints([model for model in catalog.models if model.endpoint is not None])
    local = importlib.util.find_spec("llama_cpp") is not None
    out.print("local model runtime (llama-cpp-python): " + ("[green]installed[/green]" if local else
                                                          "[yellow]not installed[/yellow] (local/ models unavailable)"))
    from rosetta.providers.local_weights import catalog_models, resolve

    for model in catalog_models():  # assembles the weights into the cache on first use, then checks them
        try:
            out.print(f"  {model.id}: [green]weights ok[/green] (sha256 pinned) {escape(str(resolve(model.id).path))}")
        except RosettaError as exc:
            out.print(f"  {model.id}: [yellow]weights unavailable[/yellow] {escape(str(exc))}")
    _retiring_artifacts(settings.compiled_dir)
    version = importlib.metadata.version("litellm")
    bad = version in KNOWN_BAD_LITELLM
    out.print(f"litellm {version}: " + ("[red]KNOWN-BAD RELEASE — reinstall from the lock file[/red]" if bad
                                        else "[green]ok[/green]"))
    if bad:
        raise typer.Exit(1)


PROBE_TIMEOUT_S = 3.0
"""How long ``doctor`` waits for a declared endpoint to answer."""


def _declared_endpoints(models: list) -> None:
    """Whether each declared endpoint answers ``GET <api_base>/models`` (OpenAI-compatible servers
    list their models there; any HTTP answer shows the server is up), with its key if one is declared."""
    if not models:
        return
    import httpx

    table = Table(title="declared endpoints ([tool.rosetta.models])", title_justify="left", box=box.SIMPLE_HEAD,
                  pad_edge=False)
    for column in ("Model", "Endpoint", "Status"):
        table.add_column(column, overflow="fold")
    for model in models:
        try:
            params = model.connection()
        except RosettaError as error:
            table.add_row(escape(model.id), "", f"[yellow]{escape(error.problems[0].message)}[/yellow]")
            continue
        base = params.get("api_base")
        if base is None:
            table.add_row(escape(model.id), "[dim]the provider's default[/dim]", "[dim]not probed[/dim]")
            continue
        headers = {"Authorization": f"Bearer {params['api_key']}"} if params.get("api_key") else {}
        try:
            answer = httpx.get(base.rstrip("/") + "/models", headers=headers, timeout=PROBE_TIMEOUT_S)
            status = (f"[green]reachable[/green] (HTTP {answer.status_code})" if answer.status_code < 400 else
                      f"[yellow]answers HTTP {answer.status_code}[/yellow]"
                      + (" (check the key in $" + model.endpoint.api_key_env + ")"
                         if answer.status_code in (401, 403) and model.endpoint.api_key_env else ""))
        except httpx.HTTPError as exc:
            status = f"[red]unreachable[/red] ({escape(type(exc).__name__)} within {PROBE_TIMEOUT_S:g}s)"
        table.add_row(escape(model.id), escape(base), status)
    out.print(table)


def _retiring_artifacts(compiled_dir: Path) -> None:
    """The artifacts under ``compiled_dir`` whose model is retired (never served again) or deprecated."""
    from rosetta.providers.catalog import load_catalog
    from rosetta.store.lookup import compiled_models

    catalog = load_catalog()
    names, rows = catalog.names(), []
    for agent, models in compiled_models(compiled_dir).items():
        for model_id, path in models.items():
            model = names.get(model_id.lower())
            status = catalog.status(model) if model is not None else None
            if status is not None and status.state != "current":
                rows.append((agent, model_id, status, path))
    if not rows:
        out.print(f"compiled artifacts ({escape(str(compiled_dir))}): [green]none for retired or deprecated "
                  "models[/green]")
        return
    out.print(f"compiled artifacts for retired or deprecated models: [yellow]{len(rows)}[/yellow]")
    for agent, model_id, status, path in rows:
        state = f"[red]retired {status.date}[/red]" if status.state == "retired" else \
            f"[yellow]retires {status.date}[/yellow]"
        out.print(f"  {escape(agent)} on {escape(model_id)}: {state}, replace with {escape(status.replacement)} "
                  f"[dim]({escape(str(path))})[/dim]")
    out.print("[dim]retired models are never compiled or called: move model_preferences to the replacement, run "
              "`rosetta compile`, and delete the old artifacts[/dim]")
