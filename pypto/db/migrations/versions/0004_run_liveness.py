"""Runs carry the process that runs them and a heartbeat, so a run whose process died
without ending it (SIGKILL, a lost machine) can be told from one still running.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("pypto_runs", sa.Column("pid", sa.Integer(), nullable=True))
    op.add_column("pypto_runs", sa.Column("heartbeat", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("pypto_runs") as batch:
        batch.drop_column("heartbeat")
        batch.drop_column("pid")
