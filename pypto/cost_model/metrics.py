"""How well a cost model ranks the schedules of one workload (DESIGN §8): Spearman's rank
correlation of scores with speed, and TenSet's top-k score (the best measured cycles
over the best cycles among the model's k top-ranked schedules: 1 when its top-k holds
the true best)."""

from __future__ import annotations

import numpy as np


def rankdata(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n of ``x``, ties given their average rank."""
    x = np.asarray(x, dtype=np.float64)
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x), dtype=np.float64)
    ranks[order] = np.arange(1, len(x) + 1)
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    return sums[inverse] / counts[inverse]


def spearman(scores: np.ndarray, cycles: np.ndarray) -> float:
    """Rank correlation of ``scores`` (higher: faster) with speed (fewer cycles)."""
    if len(scores) < 2:
        return 0.0
    a, b = rankdata(scores), rankdata(-np.asarray(cycles, dtype=np.float64))
    a, b = a - a.mean(), b - b.mean()
    den = float(np.sqrt((a * a).sum() * (b * b).sum()))
    return float((a * b).sum() / den) if den > 0 else 0.0


def top_k_score(scores: np.ndarray, cycles: np.ndarray, k: int) -> float:
    """best cycles / best cycles among the ``k`` highest-scored (ties: earlier first)."""
    cycles = np.asarray(cycles, dtype=np.float64)
    top = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")[:k]
    return float(cycles.min() / cycles[top].min())
