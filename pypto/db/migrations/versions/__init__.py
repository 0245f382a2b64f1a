"""One module per schema revision; ``pypto.db.models.SCHEMA_REVISION`` names the head."""
