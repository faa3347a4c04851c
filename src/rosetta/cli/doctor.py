"""``rosetta doctor``: provider credentials (never printed), the endpoints of the project's declared
models (reachable or not), the local model runtime and weights, the installed litellm release, and
compiled artifacts for models their vendors retire.

A declaration comes with the project, and a cloned repository's pyproject.toml may point a model at
any server: ``doctor`` sends requests only to endpoints on this machine (loopback), and to another
only when told to with ``--probe MODEL``; a probe carries the key its ``api_key_env`` names, no other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from rosetta.cli.common import fits_table, out, print_record, project_settings, reports_errors
from rosetta.errors import Problem, RosettaError, UsageError
from rosetta.providers.endpoints import is_loopback

KNOWN_BAD_LITELLM = {"1.82.7", "1.82.8"}
"""litellm releases that were malicious uploads."""


@reports_errors
def doctor(ctx: typer.Context, probe: Annotated[list[str] | None, typer.Option(
        "--probe", metavar="MODEL", help="Also probe this declared model's endpoint when it is not on this machine, "
                                         "sending it the key its api_key_env names (repeatable). Endpoints on "
                                         "127.0.0.1, ::1 or localhost are always probed; others are not by "
                                         "default.")] = None) -> None:
    """Check the environment: provider credentials (never printed), declared endpoints, local model,
    litellm version, and artifacts compiled for retired or deprecated models."""
    import importlib.metadata
    import importlib.util

    from rosetta.providers.catalog import catalog_for

    settings = project_settings(ctx)
    catalog = catalog_for(settings.root, settings.models)
    probed = {_declared(catalog, name) for name in probe or ()}
    rows = []  # one per provider: the project's targets first, then the catalog's other providers
    for model, agents in [*_targeted(settings, catalog).items(), *((m, []) for m in catalog.models)]:
        if model.provider not in {row[0] for row in rows} and model.provider != "local" and model.endpoint is None:
            named = ", ".join(agents[:2]) + (f" +{len(agents) - 2}" if len(agents) > 2 else "")
            rows.append((model.provider, model.id, named, _credentials_status(model.id)))
    if fits_table(width=150):
        table = Table(title=escape("providers"), title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
        for column in ("Provider", "Model", "Targeted by"):
            table.add_column(column, no_wrap=True)
        table.add_column("Credentials")
        for provider, model_id, named, status in rows:
            table.add_row(provider, escape(model_id), escape(named) or "[dim]-[/dim]", status)
        out.print(table)
    else:
        out.print("providers")
        for provider, model_id, named, status in rows:
            print_record(f"[bold]{provider}[/bold] {escape(model_id)}",
                         [("credentials", Text.from_markup(status).plain), ("targeted by", named)])
    _declared_endpoints(catalog, probed)
    local = importlib.util.find_spec("llama_cpp") is not None
    out.print("local model runtime (llama-cpp-python): " + ("[green]installed[/green]" if local else
                                                          "[yellow]not installed[/yellow] (local/ models unavailable)"))
    from rosetta.local.project import LocalSettings
    from rosetta.local.threads import thread_count
    from rosetta.local.weights import catalog_models, resolve

    local_settings = LocalSettings.of(settings)
    out.print(f"  threads per model: {thread_count(settings.local_threads)} " + escape("(set local_threads in [tool.rosetta] or "
              "ROSETTA_LOCAL_THREADS; one per process when several share the CPUs)"))
    for model in catalog_models():  # assembles the weights into the cache on first use, then checks them
        try:
            out.print(f"  {model.id}: [green]weights ok[/green] (sha256 pinned) {escape(str(resolve(model.id, local_settings).path))}")
        except RosettaError as exc:
            out.print(f"  {model.id}: [yellow]weights unavailable[/yellow] {escape(str(exc))}")
    _retiring_artifacts(settings.compiled_dir)
    version = importlib.metadata.version("litellm")
    bad = version in KNOWN_BAD_LITELLM
    out.print(f"litellm {version}: " + ("[red]KNOWN-BAD RELEASE — reinstall from the lock file[/red]" if bad
                                        else "[green]ok[/green]"))
    if bad:
        raise typer.Exit(1)


def _targeted(settings: Any, catalog: Any) -> dict[Any, list[str]]:
    """Each model the project's agents are compiled for (their model_preferences, else the project's
    default models) → those agents, in the order found; what does not load or resolve is left to
    ``rosetta validate``."""
    from rosetta.compile.compiler import CompileOptions, targets
    from rosetta.definition import load_many

    options = CompileOptions.for_settings(settings)
    found: dict[Any, list[str]] = {}
    for result in load_many([settings.signatures_dir]) if settings.signatures_dir.is_dir() else ():
        if result.definition is None:
            continue
        for name in targets(tuple(result.definition.spec.portability.model_preferences), options):
            try:
                model = catalog.resolve(name, unlisted=options.unlisted)
            except RosettaError:
                continue
            found.setdefault(model, []).append(result.definition.name)
    return found


def _credentials_status(model_id: str) -> str:
    """What a call to ``model_id`` would authenticate with here, as the runtime checks it before
    calling (:mod:`rosetta.providers.credentials`): variables' names only, never a value."""
    from rosetta.providers.credentials import check_credentials

    found = check_credentials(model_id)
    unset = escape(", ".join(found.unset))
    if found.error is not None:  # an odd provider must not break the report
        return f"[yellow]unknown[/yellow] (litellm could not say: {escape(found.error)})"
    if found.missing and found.ambient:
        return (f"[yellow]not in the environment[/yellow] ({escape(', '.join(found.missing))}); its SDK may still "
                "find them (a profile, a role or managed identity, application default credentials)")
    if found.missing:
        return f"[yellow]missing {escape(', '.join(found.missing))}[/yellow] (a run moves on to the next model)"
    if found.ambient and found.unset:  # e.g. Vertex AI: its project and region unset, its credentials from ADC
        return f"[dim]from its SDK (application default credentials, a profile or role; not checked here); {unset} " \
               "not set[/dim]"
    if found.unset and all(name.endswith("_API_BASE") for name in found.unset):  # a URL, not a credential (Ollama)
        return f"[dim]none needed; the default endpoint unless {unset} is set[/dim]"
    return "[green]set[/green]" + (f" [dim](defaults apply: {unset} not set)[/dim]" if found.unset else "")


PROBE_TIMEOUT_S = 3.0
"""How long ``doctor`` waits for a declared endpoint to answer."""


def _declared(catalog: Any, name: str) -> str:
    """The id of the declared model ``--probe`` names (an id or alias)."""
    declared = sorted(model.id for model in catalog.models if model.endpoint is not None)
    model = catalog.names().get(name.strip().lower())
    if model is None or model.endpoint is None:
        raise UsageError(Problem(f"--probe {name}: {'no' if model is None else 'not a'} declared model with an "
                                 "endpoint", field="--probe", expected="a model id or alias declared with api_base or "
                                 "api_base_env in [tool.rosetta.models]",
                                 hint="declared endpoints: " + ", ".join(declared) if declared else
                                 "this project declares no endpoint; doctor probes nothing else"))
    return model.id


def _declared_endpoints(catalog: Any, probed: set[str]) -> None:
    """Whether each declared endpoint answers ``GET <api_base>/models`` (OpenAI-compatible servers
    list their models there; any HTTP answer shows the server is up). Only loopback endpoints and
    those in ``probed`` are asked, each with its own key if it declares one."""
    models = [model for model in catalog.models if model.endpoint is not None]
    if not models:
        return
    table = Table(title=escape("declared endpoints ([tool.rosetta.models])"), title_justify="left",
                  box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("Model", "Endpoint", "Status"):
        table.add_column(column, overflow="fold")
    for model in models:
        endpoint = model.endpoint
        shown = f"${endpoint.api_base_env}" if endpoint.api_base_env else ""
        try:
            base = endpoint.url(model.id)
            shown = " = ".join(part for part in (shown, base and escape(base)) if part)
            if base is None:
                status = "[dim]the provider's default; not probed[/dim]"
            elif not (is_loopback(base) or model.id in probed):
                status = f"[dim]not probed (pass --probe {escape(model.id)} to probe it)[/dim]"
            else:
                status = _probe(base, endpoint.key(model.id), endpoint.api_key_env)
        except RosettaError as error:  # the problem names variables, never their values
            problem = error.problems[0]
            declared = catalog.declared_at(model.id, problem.field.rsplit(".", 1)[-1] if problem.field else None)
            status = f"[yellow]{escape(problem.message)}[/yellow]" + (
                f" [dim](declared at {escape(str(declared))})[/dim]" if declared.file else "") + (
                f"\n[dim]hint: {escape(problem.hint)}[/dim]" if problem.hint else "")
        table.add_row(escape(model.id), shown, status)
    out.print(table)


def _probe(base: str, key: str | None, key_env: str | None) -> str:
    """The status of one probe: redirects are not followed, so the key goes to ``base``'s server alone."""
    import httpx

    headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
    try:
        answer = httpx.get(base.rstrip("/") + "/models", headers=headers, timeout=PROBE_TIMEOUT_S,
                           follow_redirects=False)
    except httpx.HTTPError as exc:
        return f"[red]unreachable[/red] ({escape(type(exc).__name__)} within {PROBE_TIMEOUT_S:g}s)"
    if answer.status_code < 400:
        return f"[green]reachable[/green] (HTTP {answer.status_code})"
    return f"[yellow]answers HTTP {answer.status_code}[/yellow]" + (
        f" (check the key in ${key_env})" if answer.status_code in (401, 403) and key_env else "")


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
        state = f"[red]{status.label}[/red]" if status.state == "retired" else f"[yellow]{status.label}[/yellow]"
        out.print(f"  {escape(agent)} on {escape(model_id)}: {state}, replace with {escape(status.replacement)} "
                  f"[dim]({escape(str(path))})[/dim]")
    out.print("[dim]retired models are never compiled or called: move model_preferences to the replacement, run "
              "`rosetta compile`, and delete the old artifacts[/dim]")
