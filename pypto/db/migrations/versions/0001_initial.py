"""Initial schema: workloads, targets, runs, records, cost models, meta.

Revision ID: 0001
Revises:
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

KEY = sa.String(length=64)
WHEN = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "pypto_meta",
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_pypto_meta")),
    )
    op.create_table(
        "pypto_targets",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("key", KEY, nullable=False),
        sa.Column("descriptor", sa.Text(), nullable=True),
        sa.Column("created_at", WHEN, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pypto_targets")),
        sa.UniqueConstraint("key", name=op.f("uq_pypto_targets_key")),
    )
    op.create_table(
        "pypto_workloads",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", KEY, nullable=False),
        sa.Column("family_key", KEY, nullable=False),
        sa.Column("family", sa.String(length=32), nullable=False),
        sa.Column("spec", sa.Text(), nullable=False),
        sa.Column("sizes", sa.Text(), nullable=False),
        sa.Column("flops", sa.BigInteger(), nullable=False),
        sa.Column("created_at", WHEN, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pypto_workloads")),
        sa.UniqueConstraint("key", name=op.f("uq_pypto_workloads_key")),
    )
    op.create_index(op.f("ix_pypto_workloads_family_key"), "pypto_workloads", ["family_key"])
    op.create_table(
        "pypto_cost_models",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("target_id", sa.Integer(), nullable=False),
        sa.Column("family", sa.String(length=32), nullable=False),
        sa.Column("model_version", sa.String(length=64), nullable=False),
        sa.Column("format", sa.String(length=8), nullable=False),
        sa.Column("blob", sa.LargeBinary(), nullable=False),
        sa.Column("metrics", sa.Text(), nullable=False),
        sa.Column("samples", sa.Integer(), nullable=False),
        sa.Column("updated_at", WHEN, nullable=False),
        sa.CheckConstraint("format IN ('json', 'ubj')", name=op.f("ck_pypto_cost_models_format")),
        sa.ForeignKeyConstraint(["target_id"], ["pypto_targets.id"], ondelete="CASCADE",
                                name=op.f("fk_pypto_cost_models_target_id_pypto_targets")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pypto_cost_models")),
        sa.UniqueConstraint("target_id", "family", "model_version",
                            name=op.f("uq_pypto_cost_models_target_id_family_model_version")),
    )
    op.create_table(
        "pypto_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("strategy", sa.String(length=32), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("trials_asked", sa.Integer(), nullable=False),
        sa.Column("trials_done", sa.Integer(), nullable=False),
        sa.Column("best_cycles", sa.BigInteger(), nullable=True),
        sa.Column("command", sa.Text(), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("workload_id", sa.Integer(), nullable=True),
        sa.Column("target_id", sa.Integer(), nullable=True),
        sa.Column("started_at", WHEN, nullable=False),
        sa.Column("finished_at", WHEN, nullable=True),
        sa.CheckConstraint("status IN ('running', 'done', 'failed', 'interrupted')",
                           name=op.f("ck_pypto_runs_status")),
        sa.ForeignKeyConstraint(["target_id"], ["pypto_targets.id"], ondelete="SET NULL",
                                name=op.f("fk_pypto_runs_target_id_pypto_targets")),
        sa.ForeignKeyConstraint(["workload_id"], ["pypto_workloads.id"], ondelete="SET NULL",
                                name=op.f("fk_pypto_runs_workload_id_pypto_workloads")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pypto_runs")),
    )
    op.create_table(
        "pypto_records",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("workload_id", sa.Integer(), nullable=False),
        sa.Column("target_id", sa.Integer(), nullable=False),
        sa.Column("schedule", sa.Text(), nullable=False),
        sa.Column("schedule_key", KEY, nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("cycles", sa.BigInteger(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("model_version", sa.String(length=64), nullable=False),
        sa.Column("pypto_version", sa.String(length=32), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.Column("created_at", WHEN, nullable=False),
        sa.Column("updated_at", WHEN, nullable=False),
        sa.CheckConstraint("(status = 'ok') = (cycles IS NOT NULL)",
                           name=op.f("ck_pypto_records_cycles_iff_ok")),
        sa.CheckConstraint("source IN ('tune', 'import', 'manual')",
                           name=op.f("ck_pypto_records_source")),
        sa.CheckConstraint("status IN ('ok', 'invalid', 'error', 'timeout')",
                           name=op.f("ck_pypto_records_status")),
        sa.ForeignKeyConstraint(["run_id"], ["pypto_runs.id"], ondelete="SET NULL",
                                name=op.f("fk_pypto_records_run_id_pypto_runs")),
        sa.ForeignKeyConstraint(["target_id"], ["pypto_targets.id"], ondelete="CASCADE",
                                name=op.f("fk_pypto_records_target_id_pypto_targets")),
        sa.ForeignKeyConstraint(["workload_id"], ["pypto_workloads.id"], ondelete="CASCADE",
                                name=op.f("fk_pypto_records_workload_id_pypto_workloads")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pypto_records")),
        sa.UniqueConstraint(
            "workload_id", "target_id", "schedule_key", "model_version",
            name=op.f("uq_pypto_records_workload_id_target_id_schedule_key_model_version")),
    )
    op.create_index("ix_pypto_records_best", "pypto_records",
                    ["workload_id", "target_id", "model_version", "status", "cycles", "id"])
    op.create_index(op.f("ix_pypto_records_run_id"), "pypto_records", ["run_id"])


def downgrade() -> None:
    for table in ("pypto_records", "pypto_runs", "pypto_cost_models", "pypto_workloads",
                  "pypto_targets", "pypto_meta"):
        op.drop_table(table)
