"""Tensor layouts: how a tensor's logical axes are named and laid out in memory."""

from __future__ import annotations

from pypto.errors import LayoutError

# Layout name -> required rank (None: any rank).
LAYOUTS: dict[str, int | None] = {"ND": None, "NCHW": 4, "NHWC": 4, "NC1HWC0": 5}


def check_layout(layout: str | None, rank: int) -> str:
    """Validate ``layout`` for a tensor of ``rank`` dims; ``None`` means ``"ND"``."""
    if layout is None:
        return "ND"
    if not isinstance(layout, str) or layout.upper() not in LAYOUTS:
        raise LayoutError(f"unknown layout {layout!r}: use one of {', '.join(LAYOUTS)}")
    name = layout.upper()
    need = LAYOUTS[name]
    if need is not None and rank != need:
        raise LayoutError(f"layout {name!r} needs a {need}-D tensor, got {rank}-D; "
                          "use layout='ND' for other ranks")
    return name
