"""The device simulator: executes and times PTO programs.

Modules here are imported on use (``pypto.sim.stats`` …); this package module imports
nothing so that ``import pypto`` stays cheap.
"""
