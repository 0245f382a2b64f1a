"""The geometry of a conv2d workload (shared by the cube's and the vector unit's
spaces)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ConvShape:
    """A conv2d workload's geometry: NHWC input, ``[R*S*C, K]`` weights, NHWC output.

    A grouped conv (``groups`` > 1) is ``groups`` implicit GEMMs, one per group: ``c``
    and ``k`` are the channels of one group (the input's are ``c_total``), and the
    weights ``[R*S*c, K]`` hold group ``g``'s GEMM in columns ``g*k ..``."""

    n: int
    h: int
    w: int
    c: int
    k: int
    r: int
    s: int
    oh: int
    ow: int
    stride: tuple[int, int]
    padding: tuple[int, int]
    dilation: tuple[int, int]
    dtype: str          # operand dtype
    epilogue: bool      # elementwise ops after the conv (computed on UB)
    groups: int = 1     # grouped conv: ``c`` and ``k`` are then per group
    layout: str = "NHWC"  # of the input and output ("NCHW": ``conv2d_nchw``, read direct)

    @property
    def c_total(self) -> int:
        """Input channels (all groups): the input's C."""
        return self.c * self.groups

    @property
    def k_total(self) -> int:
        """Output channels (all groups): the output's K."""
        return self.k * self.groups

    @property
    def m(self) -> int:
        """GEMM rows: output pixels."""
        return self.n * self.oh * self.ow

    @property
    def red(self) -> int:
        """GEMM reduction: ``R * S * C``."""
        return self.r * self.s * self.c
