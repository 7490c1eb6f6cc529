"""Identity: OAuth clients, grants (connections) and one-time codes; refresh families on tokens;
members' passkeys, browser sessions and WebAuthn challenges; rate-limit counters shared by every
server process.

Revision ID: 20261130_0005
Revises: 20261130_0004
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261130_0005"
down_revision: str | None = "20261130_0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "rate_limit_buckets",
        sa.Column("key", sa.String(200), nullable=False),
        sa.Column("window_start", sa.BigInteger(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_rate_limit_buckets")),
    )
    with op.batch_alter_table("rate_limit_buckets", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_rate_limit_buckets_expires_at"), ["expires_at"], unique=False)

    op.create_table(
        "member_passkeys",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("org_id", sa.String(40), nullable=False),
        sa.Column("member_id", sa.String(40), nullable=False),
        sa.Column("credential_id", sa.String(1400), nullable=False),
        sa.Column("public_key", sa.LargeBinary(), nullable=False),
        sa.Column("sign_count", sa.BigInteger(), nullable=False),
        sa.Column("name", sa.String(60), nullable=False),
        sa.Column("transports", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["member_id"], ["members.id"], name=op.f("fk_member_passkeys_member_id_members")
        ),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name=op.f("fk_member_passkeys_org_id_organizations")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_member_passkeys")),
        sa.UniqueConstraint("credential_id", name=op.f("uq_member_passkeys_credential_id")),
    )
    with op.batch_alter_table("member_passkeys", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_member_passkeys_member_id"), ["member_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_member_passkeys_org_id"), ["org_id"], unique=False)

    op.create_table(
        "web_sessions",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("org_id", sa.String(40), nullable=False),
        sa.Column("member_id", sa.String(40), nullable=False),
        sa.Column("passkey_id", sa.String(40), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["member_id"], ["members.id"], name=op.f("fk_web_sessions_member_id_members")
        ),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name=op.f("fk_web_sessions_org_id_organizations")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_web_sessions")),
    )
    with op.batch_alter_table("web_sessions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_web_sessions_expires_at"), ["expires_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_web_sessions_member_id"), ["member_id"], unique=False)

    op.create_table(
        "webauthn_challenges",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("purpose", sa.String(20), nullable=False),
        sa.Column("challenge", sa.LargeBinary(), nullable=False),
        sa.Column("member_id", sa.String(40), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["member_id"], ["members.id"], name=op.f("fk_webauthn_challenges_member_id_members")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webauthn_challenges")),
    )
    with op.batch_alter_table("webauthn_challenges", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_webauthn_challenges_expires_at"), ["expires_at"], unique=False)

    op.create_table(
        "oauth_clients",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("client_id", sa.String(512), nullable=False),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("name", sa.String(120), nullable=True),
        sa.Column("redirect_uris", sa.JSON(), nullable=False),
        sa.Column("grant_types", sa.JSON(), nullable=False),
        sa.Column("token_endpoint_auth_method", sa.String(30), nullable=False),
        sa.Column("application_type", sa.String(10), nullable=True),
        sa.Column("scope", sa.String(400), nullable=True),
        sa.Column("secret_hash", sa.String(64), nullable=True),
        sa.Column("client_uri", sa.String(512), nullable=True),
        sa.Column("org_id", sa.String(40), nullable=True),
        sa.Column("agent_id", sa.String(40), nullable=True),
        sa.Column("document_etag", sa.String(200), nullable=True),
        sa.Column("fetched_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("stale_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_by", sa.String(160), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("disabled_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["agent_id"], ["agents.id"], name=op.f("fk_oauth_clients_agent_id_agents")),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name=op.f("fk_oauth_clients_org_id_organizations")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_oauth_clients")),
        sa.UniqueConstraint("client_id", name=op.f("uq_oauth_clients_client_id")),
    )
    with op.batch_alter_table("oauth_clients", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_oauth_clients_org_id"), ["org_id"], unique=False)

    op.create_table(
        "oauth_grants",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("org_id", sa.String(40), nullable=False),
        sa.Column("agent_id", sa.String(40), nullable=False),
        sa.Column("client_id", sa.String(40), nullable=False),
        sa.Column("member_id", sa.String(40), nullable=True),
        sa.Column("scopes", sa.String(400), nullable=False),
        sa.Column("resource", sa.String(400), nullable=False),
        sa.Column("redirect_uri", sa.String(2048), nullable=True),
        sa.Column("created_by", sa.String(160), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_by", sa.String(160), nullable=True),
        sa.ForeignKeyConstraint(["agent_id"], ["agents.id"], name=op.f("fk_oauth_grants_agent_id_agents")),
        sa.ForeignKeyConstraint(
            ["client_id"], ["oauth_clients.id"], name=op.f("fk_oauth_grants_client_id_oauth_clients")
        ),
        sa.ForeignKeyConstraint(
            ["member_id"], ["members.id"], name=op.f("fk_oauth_grants_member_id_members")
        ),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name=op.f("fk_oauth_grants_org_id_organizations")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_oauth_grants")),
    )
    with op.batch_alter_table("oauth_grants", schema=None) as batch_op:
        batch_op.create_index("ix_oauth_grants_client_agent", ["client_id", "agent_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_oauth_grants_org_id"), ["org_id"], unique=False)

    op.create_table(
        "oauth_codes",
        sa.Column("code_hash", sa.String(64), nullable=False),
        sa.Column("client_id", sa.String(40), nullable=False),
        sa.Column("grant_id", sa.String(40), nullable=False),
        sa.Column("org_id", sa.String(40), nullable=False),
        sa.Column("agent_id", sa.String(40), nullable=False),
        sa.Column("member_id", sa.String(40), nullable=False),
        sa.Column("redirect_uri", sa.String(2048), nullable=False),
        sa.Column("code_challenge", sa.String(128), nullable=False),
        sa.Column("resource", sa.String(400), nullable=False),
        sa.Column("scopes", sa.String(400), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("family_id", sa.String(40), nullable=True),
        sa.ForeignKeyConstraint(["agent_id"], ["agents.id"], name=op.f("fk_oauth_codes_agent_id_agents")),
        sa.ForeignKeyConstraint(
            ["client_id"], ["oauth_clients.id"], name=op.f("fk_oauth_codes_client_id_oauth_clients")
        ),
        sa.ForeignKeyConstraint(
            ["grant_id"], ["oauth_grants.id"], name=op.f("fk_oauth_codes_grant_id_oauth_grants")
        ),
        sa.ForeignKeyConstraint(["member_id"], ["members.id"], name=op.f("fk_oauth_codes_member_id_members")),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name=op.f("fk_oauth_codes_org_id_organizations")
        ),
        sa.PrimaryKeyConstraint("code_hash", name=op.f("pk_oauth_codes")),
    )
    with op.batch_alter_table("oauth_codes", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_oauth_codes_expires_at"), ["expires_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_oauth_codes_grant_id"), ["grant_id"], unique=False)

    with op.batch_alter_table("access_tokens", schema=None) as batch_op:
        batch_op.add_column(sa.Column("grant_id", sa.String(40), nullable=True))
        batch_op.add_column(sa.Column("family_id", sa.String(40), nullable=True))
        batch_op.add_column(sa.Column("rotated_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.create_index(batch_op.f("ix_access_tokens_family_id"), ["family_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_access_tokens_grant_id"), ["grant_id"], unique=False)
        batch_op.create_foreign_key(
            batch_op.f("fk_access_tokens_grant_id_oauth_grants"), "oauth_grants", ["grant_id"], ["id"]
        )


def downgrade() -> None:
    with op.batch_alter_table("access_tokens", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("fk_access_tokens_grant_id_oauth_grants"), type_="foreignkey")
        batch_op.drop_index(batch_op.f("ix_access_tokens_grant_id"))
        batch_op.drop_index(batch_op.f("ix_access_tokens_family_id"))
        batch_op.drop_column("rotated_at")
        batch_op.drop_column("family_id")
        batch_op.drop_column("grant_id")

    with op.batch_alter_table("oauth_codes", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_oauth_codes_grant_id"))
        batch_op.drop_index(batch_op.f("ix_oauth_codes_expires_at"))

    op.drop_table("oauth_codes")
    with op.batch_alter_table("oauth_grants", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_oauth_grants_org_id"))
        batch_op.drop_index("ix_oauth_grants_client_agent")

    op.drop_table("oauth_grants")
    with op.batch_alter_table("oauth_clients", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_oauth_clients_org_id"))

    op.drop_table("oauth_clients")
    with op.batch_alter_table("webauthn_challenges", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_webauthn_challenges_expires_at"))

    op.drop_table("webauthn_challenges")
    with op.batch_alter_table("web_sessions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_web_sessions_member_id"))
        batch_op.drop_index(batch_op.f("ix_web_sessions_expires_at"))

    op.drop_table("web_sessions")
    with op.batch_alter_table("member_passkeys", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_member_passkeys_org_id"))
        batch_op.drop_index(batch_op.f("ix_member_passkeys_member_id"))

    op.drop_table("member_passkeys")
    with op.batch_alter_table("rate_limit_buckets", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_rate_limit_buckets_expires_at"))

    op.drop_table("rate_limit_buckets")
