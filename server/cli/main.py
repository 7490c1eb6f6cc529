"""Top-level commands: serve, migrate, demo, doctor, audit; `admin` is its own group."""

from __future__ import annotations

import signal
from types import FrameType

import typer

from server.cli import admin, audit, demo, doctor, schemas
from server.cli.context import cli_context
from server.cli.output import command_group, emit, fail, reported_errors

app = command_group(
    "Paywarden: a spending control plane for AI agents that pay x402 APIs.",
    example="paywarden demo",
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(admin.app, name="admin")
app.add_typer(audit.app, name="audit")
app.command("demo")(demo.demo)
app.command("doctor")(doctor.doctor)


@app.command()
def migrate(as_json: bool = typer.Option(False, "--json", help="Print one JSON object.")) -> None:
    """Apply database migrations up to the newest schema (creating the database file and the
    master key file next to it on first run, with SQLite)."""
    from server.kit import migrations
    from server.wallets.master_key import open_master_key

    with reported_errors():
        ctx = cli_context(creates=True)
        # ctx.db checks the key before the schema moves: another key than the database's changes nothing.
        before = migrations.current_revision(ctx.db)
        migrations.upgrade(ctx.db)
        after = migrations.current_revision(ctx.db)
        open_master_key(ctx.db, ctx.settings, clock=ctx.clock)  # records its check value
        emit(
            schemas.migration(before=before, after=after, database=_redact(ctx.settings.database_url)),
            as_json=as_json,
        )


@app.command()
def serve(
    host: str = typer.Option("127.0.0.1", help="Address to bind."),
    port: int = typer.Option(8402, help="Port to bind."),
    workers: int = typer.Option(1, min=1, max=64, help="Server processes sharing the port."),
) -> None:
    """Serve the MCP endpoint and the HTTP API. Without PAYWARDEN_PUBLIC_URL the public URL is
    http://localhost:PORT (or http://HOST:PORT for a named host)."""
    import os
    import shutil
    import tempfile

    import uvicorn

    from server.kit.loading import collect_later
    from server.kit.stopping import calls_grace_seconds
    from server.settings import is_configured

    own_metrics_dir: str | None = None
    with reported_errors():
        if not is_configured("PAYWARDEN_PUBLIC_URL"):
            # The workers read it too: they load their settings from this environment.
            os.environ["PAYWARDEN_PUBLIC_URL"] = f"http://{public_name(host)}:{port}"
        shared = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
        if shared and not os.path.isdir(shared):
            fail(f"PROMETHEUS_MULTIPROC_DIR: {shared} is not a directory", 2)
        if not shared and workers > 1:
            # The workers share one port, so a scrape reaches any of them: they share their numbers.
            own_metrics_dir = os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(
                prefix="paywarden-metrics-"
            )
        collect_later()  # until the app's factory has loaded it (server/kit/loading.py)
        ctx = cli_context()
        ctx.ready()
        shared_in = f", metrics shared in {own_metrics_dir}" if own_metrics_dir else ""
        typer.echo(
            f"Paywarden serving {ctx.settings.mcp_url} (bound to {host}:{port}, {workers} worker(s)"
            f"{shared_in})",
            err=True,
        )
    grace = ctx.settings.shutdown_grace_seconds
    # A SIGTERM is the ordinary end of a server: once it stopped in time, the exit code is 0.
    signal.signal(signal.SIGTERM, _stopped)
    try:
        uvicorn.run(
            "server.app:create_app_from_env",
            factory=True,
            host=host,
            port=port,
            workers=workers,
            log_config=None,  # the workers log through configure_logging (PAYWARDEN_LOG_FORMAT)
            proxy_headers=False,
            timeout_graceful_shutdown=calls_grace_seconds(grace),  # uvicorn then cancels them
        )
    finally:
        if own_metrics_dir is not None:
            shutil.rmtree(own_metrics_dir, ignore_errors=True)


def _stopped(_signal: int, _frame: FrameType | None) -> None:
    raise SystemExit(0)


# Addresses this machine's browser reaches as localhost (binding every interface includes loopback).
_LOCAL_BINDINGS = frozenset({"127.0.0.1", "::1", "localhost", "0.0.0.0", "::", ""})  # noqa: S104


def public_name(host: str) -> str:
    """The name the public URL uses for a bound address: a loopback or every-interface address
    is `localhost` (a passkey needs a name, not an address)."""
    if host in _LOCAL_BINDINGS:
        return "localhost"
    return f"[{host}]" if ":" in host else host


def _redact(url: str) -> str:
    if "@" in url:
        scheme, _, rest = url.partition("://")
        return f"{scheme}://***@{rest.split('@', 1)[1]}"
    return url


def main() -> None:
    app()
