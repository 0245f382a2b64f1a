"""Records carry the cost model's score: what the ``model`` strategy predicted for the
schedule when it proposed it, beside what was measured (``pypto db stats`` shows how well
the two agree).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("pypto_records", sa.Column("model_score", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("pypto_records") as batch:
        batch.drop_column("model_score")
