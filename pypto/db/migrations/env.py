"""Alembic environment of PyPTO's schedule database.

Our revision lives in ``pypto_alembic_version`` (Optuna's Alembic uses the default
``alembic_version`` in the same database), and only ``pypto_`` tables are compared or
touched. SQLite needs batch mode to alter tables.
"""

from __future__ import annotations

from typing import Any

from alembic import context
from sqlalchemy import create_engine

from pypto.db.models import VERSION_TABLE, Base, managed


def include_name(name: str | None, type_: str, parent_names: Any) -> bool:
    return managed(name, type_)


def include_object(obj: Any, name: str | None, type_: str, reflected: bool,
                   compare_to: Any) -> bool:
    return managed(name, type_)


def _configure(**kw: Any) -> None:
    context.configure(target_metadata=Base.metadata, version_table=VERSION_TABLE,
                      include_name=include_name, include_object=include_object,
                      render_as_batch=True, compare_type=True, **kw)


def run_offline() -> None:
    _configure(url=context.config.get_main_option("sqlalchemy.url"), literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _configure(connection=connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(context.config.get_main_option("sqlalchemy.url") or "")
    with engine.connect() as conn:
        _configure(connection=conn)
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
