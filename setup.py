"""Builds the Cython extensions; all other metadata lives in pyproject.toml."""

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

NUMPY = {
    "include_dirs": [np.get_include()],
    "define_macros": [("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
}

extensions = [
    Extension("pypto.sim._stats", ["pypto/sim/_stats.pyx"], **NUMPY),
    Extension("pypto.codegen._sync", ["pypto/codegen/_sync.pyx"], **NUMPY,
              extra_compile_args=["-O3"]),
    Extension("pypto.codegen._matmul", ["pypto/codegen/_matmul.pyx"], **NUMPY,
              extra_compile_args=["-O3"]),
    # The timing engine must round exactly like the Python reference: no fused
    # multiply-adds (a -march with FMA would otherwise let the compiler contract a*b+c).
    Extension("pypto.sim._engine", ["pypto/sim/_engine.pyx"], **NUMPY,
              extra_compile_args=["-O3", "-ffp-contract=off", "-fno-fast-math"]),
]

setup(
    ext_modules=cythonize(
        extensions,
        compiler_directives={"language_level": 3, "boundscheck": False, "wraparound": False},
    ),
)
