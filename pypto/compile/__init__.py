"""The compile driver: ``Compiled``, ``compile_graph`` and the schedule resolver."""
