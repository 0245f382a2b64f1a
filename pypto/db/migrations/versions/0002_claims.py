"""Claims: the schedules live tuning workers are measuring (parallel and shared tuning).

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "pypto_claims",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("workload_id", sa.Integer(), nullable=False),
        sa.Column("target_id", sa.Integer(), nullable=False),
        sa.Column("schedule", sa.Text(), nullable=False),
        sa.Column("schedule_key", sa.String(length=64), nullable=False),
        sa.Column("model_version", sa.String(length=64), nullable=False),
        sa.Column("worker", sa.String(length=128), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("study", sa.String(length=512), nullable=False),
        sa.Column("trial", sa.Integer(), nullable=True),
        sa.Column("heartbeat", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["target_id"], ["pypto_targets.id"], ondelete="CASCADE",
                                name=op.f("fk_pypto_claims_target_id_pypto_targets")),
        sa.ForeignKeyConstraint(["workload_id"], ["pypto_workloads.id"], ondelete="CASCADE",
                                name=op.f("fk_pypto_claims_workload_id_pypto_workloads")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pypto_claims")),
        sa.UniqueConstraint(
            "workload_id", "target_id", "schedule_key", "model_version",
            name=op.f("uq_pypto_claims_workload_id_target_id_schedule_key_model_version")),
    )
    op.create_index(op.f("ix_pypto_claims_worker"), "pypto_claims", ["worker"])


def downgrade() -> None:
    op.drop_index(op.f("ix_pypto_claims_worker"), table_name="pypto_claims")
    op.drop_table("pypto_claims")
