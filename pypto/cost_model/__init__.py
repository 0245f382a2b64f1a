"""The learned cost model (DESIGN §8): features of candidate schedules computed without
simulating (``features``), an XGBoost ranker or regressor over them (``model``), its
metrics (``metrics``) and its storage in the schedule database (``storage``).

Modules load on use: XGBoost is imported only when a model is trained or loaded, so
``import pypto`` stays cheap.
"""
