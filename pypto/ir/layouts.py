"""Tensor layouts: how a tensor's logical axes are named and laid out in memory."""

from __future__ import annotations

import numpy as np

from pypto.errors import LayoutError

# Layout name -> required rank (None: any rank).
LAYOUTS: dict[str, int | None] = {"ND": None, "NCHW": 4, "NHWC": 4, "NC1HWC0": 5, "NZ": 2}

# Fractal NZ (Ascend's FRACTAL_NZ): an R x C matrix stored as C / C0 column blocks, each
# Rpad x C0 row-major, where C0 is 32 bytes of elements and Rpad is R rounded up to 16
# rows; padding is zero. A DMA of a column block is one contiguous run, whatever the
# tile's width, which is why weights are stored this way. The tensor's shape and its
# numbers stay the logical R x C; only its storage in GM differs.
NZ_ROWS = 16
NZ_BYTES = 32


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


def nz_c0(itemsize: int) -> int:
    """Elements per column block of the NZ layout (32 bytes of them)."""
    return max(1, NZ_BYTES // itemsize)


def nz_shape(shape: tuple[int, ...], itemsize: int) -> tuple[int, int, int]:
    """The storage shape ``(C / C0, Rpad, C0)`` of an ``R x C`` matrix in NZ."""
    rows, cols = shape
    c0 = nz_c0(itemsize)
    return -(-cols // c0), -(-rows // NZ_ROWS) * NZ_ROWS, c0


def to_nz(matrix: np.ndarray) -> np.ndarray:
    """An ``R x C`` matrix in NZ storage order, flat (zero padded)."""
    blocks, rpad, c0 = nz_shape(matrix.shape, matrix.dtype.itemsize)
    padded = np.zeros((rpad, blocks * c0), dtype=matrix.dtype)
    padded[:matrix.shape[0], :matrix.shape[1]] = matrix
    return np.ascontiguousarray(padded.reshape(rpad, blocks, c0).transpose(1, 0, 2)).reshape(-1)


def from_nz(stored: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """The ``R x C`` matrix held by flat NZ storage ``stored``."""
    blocks, rpad, c0 = nz_shape(shape, stored.dtype.itemsize)
    full = stored.reshape(blocks, rpad, c0).transpose(1, 0, 2).reshape(rpad, blocks * c0)
    return np.ascontiguousarray(full[:shape[0], :shape[1]])
