"""Hardware targets as data: ``load_target("ascend910b")`` reads ``ascend910b.toml``."""

from __future__ import annotations

from pypto.targets.target import (
    ROLES,
    Fractal,
    Memory,
    Path,
    Target,
    available_targets,
    load_target,
)

__all__ = ["ROLES", "Fractal", "Memory", "Path", "Target", "available_targets", "load_target"]
