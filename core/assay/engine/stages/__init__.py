"""Stages: each turns one work item into one stage outcome of its row.

Stages keep the seeds' endpoints separate; none is folded into another. The
engine runs the stages a case's family supports, in the order of
:data:`STAGE_ORDER`, and stops at the first stage whose model call fails for
good (the row then records the error).
"""

from __future__ import annotations

from ...schemas import STAGES
from .audit import run_audit
from .exec import run_exec
from .permission import run_permission
from .semantic import run_semantic
from .trajectory import run_trajectory

__all__ = ["IMPLEMENTED", "STAGE_ORDER", "run_audit", "run_exec", "run_permission", "run_semantic", "run_trajectory"]

#: The stages in the order the engine runs them: the spec's (see :data:`assay.schemas.STAGES`).
STAGE_ORDER = STAGES

#: Stage name -> coroutine function(ItemContext). Later stages register here as they are built.
IMPLEMENTED = {
    "semantic": run_semantic,
    "audit": run_audit,
    "exec": run_exec,
    "trajectory": run_trajectory,
    "permission": run_permission,
}
