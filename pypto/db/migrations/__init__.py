"""Alembic migrations of the schedule database (version table ``pypto_alembic_version``)."""
