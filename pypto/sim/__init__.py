"""The device simulator: executes and times PTO programs.

Modules here are imported on use (``pypto.sim.stats`` …); this package module imports
nothing so that ``import pypto`` stays cheap.
"""

#: Version of the timing model. Records measured under another version are stale: kept,
#: but not used for lookup until re-measured. Bump it whenever simulated cycles change.
MODEL_VERSION = "sim-2026.12.4"
