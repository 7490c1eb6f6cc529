"""Alembic environment: the URL comes from the caller or from Paywarden's settings."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from server.models import metadata
from server.models.search import include_name

config = context.config


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        include_name=include_name,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    from server.kit.db import make_engine
    from server.settings import load_settings

    url = config.get_main_option("sqlalchemy.url") or load_settings().database_url
    engine = make_engine(url)
    with engine.connect() as conn:
        _run(conn)
    engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline migrations are not supported; run `paywarden migrate`")
run_migrations_online()
