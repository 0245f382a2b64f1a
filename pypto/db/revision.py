"""The schema's names and revision, without SQLAlchemy: ``pypto.db.models`` declares the
tables, and the stdlib reader of compile-time lookups (``pypto.db.reader``) checks a
file's revision with these before it reads."""

#: The Alembic revision this code's models correspond to (``migrations/versions``).
SCHEMA_REVISION = "0004"
#: Our Alembic version table (Optuna's Alembic uses the default ``alembic_version``).
VERSION_TABLE = "pypto_alembic_version"
PREFIX = "pypto_"
