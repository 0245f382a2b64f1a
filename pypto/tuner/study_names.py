"""What the Optuna studies of PyPTO are called, and how a study is found again.

A study in Optuna's storage is named for people, short and readable: the ops, the shape,
the dtype and the target (``matmul 1024x1024x1024 f16 ascend910b``). What makes it unique
for PyPTO are its user attributes (the workload key, the target key, the timing-model
version, its kind and, for a sampler's study, the parameter encoding): a study is looked
up by those, and a name taken by another identity (two workloads that differ in a layout
or an attribute, a new timing model) gets ``#`` and a short digest of the identity.

Kinds of study (``KIND_ATTR``): ``records``, every measured trial of a (workload, target)
with its schedule's real values (``pypto.tuner.record_study``); ``sampler``, the memory of
the samplers that a ``--workers`` run or a PostgreSQL database shares
(``pypto.tuner.study``).
"""

from __future__ import annotations

import hashlib
import json
import time
import warnings
from typing import TYPE_CHECKING, Any

from pypto.sim import MODEL_VERSION
from pypto.tuner import TuneError

if TYPE_CHECKING:
    import optuna

    from pypto.ir.workload import Workload
    from pypto.tuner.tasks import Task

#: the objective's name in every study (``Study.set_metric_names``)
METRIC = "cycles"
#: the study user attribute that says which kind of PyPTO study it is
KIND_ATTR = "pypto"
#: seconds to wait for a study created by another process to get its identity attributes
IDENTITY_WAIT_S = 10.0


def short_name(workload: Workload, target: str) -> str:
    """``matmul 1024x1024x1024 f16 ascend910b``: the ops, the shape (M x K x N for a
    matmul of two 2-D inputs, else the first input's), the first input's dtype, the target.

    Example:
        >>> from pypto.ir.workload import TensorSpec, WNode, Workload
        >>> a, b = TensorSpec((64, 32), "float16"), TensorSpec((32, 16), "float16")
        >>> wl = Workload("matmul", (a, b), (WNode("matmul", (), (), (64, 16), "float16"),), (0,))
        >>> short_name(wl, "ascend910b")
        'matmul 64x32x16 f16 ascend910b'
    """
    ins = workload.inputs
    if workload.family == "matmul" and len(ins) >= 2 \
            and len(ins[0].shape) == len(ins[1].shape) == 2:
        shape: tuple[int, ...] = (*ins[0].shape, ins[1].shape[1])
    else:
        shape = ins[0].shape if ins else ()
    dtype = ins[0].dtype if ins else ""
    short = dtype.replace("bfloat", "bf").replace("float", "f").replace("uint", "u") \
        .replace("int", "i")
    ops = "+".join(workload.ops) or workload.family
    return " ".join(p for p in (ops, "x".join(map(str, shape)), short, target) if p)


def identity(task: Task, kind: str, encoding: str | None = None) -> dict[str, str]:
    """The user attributes that make a study of ``task`` unique (see the module doc)."""
    out = {KIND_ATTR: kind, "workload_key": task.workload.key, "target_key": task.target.key,
           "model_version": MODEL_VERSION}
    if encoding is not None:
        out["encoding"] = encoding
    return out


def named_study(storage: Any, name: str, ident: dict[str, str], *,
                sampler: optuna.samplers.BaseSampler | None = None,
                attrs: dict[str, Any] | None = None) -> optuna.Study:
    """The study of ``storage`` whose user attributes are ``ident``; created if there is
    none, as ``name`` (or ``name #digest`` if another identity has that name), with
    ``ident`` and ``attrs`` as user attributes and the objective named ``cycles``."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)   # "A new study created ..."
    for s in storage.get_all_studies():
        if _has(s.user_attrs, ident):
            return optuna.load_study(study_name=s.study_name, storage=storage, sampler=sampler)
    digest = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:6]
    for candidate in (name, f"{name} #{digest}"):
        try:
            study = optuna.create_study(storage=storage, sampler=sampler, study_name=candidate,
                                        direction="minimize")
        except optuna.exceptions.DuplicatedStudyError:
            study = optuna.load_study(study_name=candidate, storage=storage, sampler=sampler)
            if _identity_of(study, ident):
                return study
            continue
        # the identity first, its kind last: another process that found the name taken
        # waits for the kind, and then sees the whole identity (were the kind first, it
        # could compare a half-written identity, find it foreign and create a twin study:
        # two processes would then tune with two samplers' studies)
        items = {**ident, **(attrs or {})}
        for key, value in sorted(items.items(), key=lambda kv: kv[0] == KIND_ATTR):
            study.set_user_attr(key, value)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names([METRIC])
        return study
    raise TuneError(f"the Optuna study names {name!r} and {name + ' #' + digest!r} are both "
                    "taken by studies of other workloads; rename one of them")


def _has(attrs: dict[str, Any], ident: dict[str, str]) -> bool:
    return all(attrs.get(k) == v for k, v in ident.items())


def _identity_of(study: optuna.Study, ident: dict[str, str]) -> bool:
    """Whether ``study``, created by someone else, is the study of ``ident``: its creator
    sets the identity right after creating it, the kind last, so a study without its kind
    is waited for."""
    deadline = time.monotonic() + IDENTITY_WAIT_S
    while True:
        attrs = study.user_attrs
        if KIND_ATTR in attrs or time.monotonic() >= deadline:
            return _has(attrs, ident)
        time.sleep(0.05)
