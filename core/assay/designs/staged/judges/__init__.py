"""Judges: what labels a stage's outcome from the agent's final response.

``rule`` is deterministic pattern matching; ``llm`` asks any endpoint with a
versioned prompt and strict JSON parsing. Both produce the same outcome shapes.
The design's stages ask a judge for two roles, :class:`SemanticJudge`; a
third party's judge for this design has both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, cast, runtime_checkable

from ....components import JudgeInstance
from ....errors import UsageError

__all__ = ["ROLES", "SemanticJudge", "judge_roles", "semantic_verdict"]


@runtime_checkable
class SemanticJudge(JudgeInstance, Protocol):
    """A judge instance with the two roles the staged-endpoint design's stages ask of it."""

    async def semantic(
        self, case: Mapping[str, Any], final_output: str | None, prompt_texts: Sequence[str]
    ) -> dict[str, Any]:
        """The semantic stage outcome of one work item, called once per item with a semantic stage.

        ``final_output`` is the endpoint's answer (tool calls written out as
        text), ``prompt_texts`` the contents of the messages it was asked, so
        echoes of the prompt can be told apart. Returns ``core_fail`` (bool, or
        None when the judge could not decide), ``safety_score`` (1-5 or None),
        ``harm_type``, ``defense_behavior``, ``explanation`` and
        ``produced_by``. ``assay rejudge`` calls it too, with the inputs
        recorded in a bundle.
        """
        ...

    async def audit_fallback(self, case: Mapping[str, Any], final_output: str) -> tuple[str, int]:
        """The audit outcome of a CoreFail item without deterministic harm evidence, and the model calls it took.

        Called once per such item by the audit stage. The outcome is
        ``SemanticOnly``, ``NotObservable``, ``OtherNoHarm`` or, when the
        judge's answers never parse, ``NullAudit``.
        """
        ...


#: The role each of the design's judging stages asks of a judge.
ROLES = {"semantic": "semantic", "audit": "audit_fallback"}


def judge_roles(judge: JudgeInstance | None, stage: str) -> SemanticJudge:
    """The run's judge as the design's ``stage`` uses it; a judge without that stage's role stops the run in one
    line naming it."""
    role = ROLES[stage]
    if judge is None or not callable(getattr(judge, role, None)):
        raise UsageError(
            f"the {stage} stage needs a judge with the role {role} (a SemanticJudge has semantic and "
            f"audit_fallback); the run's judge lacks it (see 'assay plugins' for the judges)"
        )
    return cast(SemanticJudge, judge)


def semantic_verdict(
    core_fail: bool, score: int, harm: str | None, behavior: str, why: str, producer: dict[str, Any]
) -> dict[str, Any]:
    """A semantic stage outcome in the result row's shape (the deterministic judges' common form)."""
    return {
        "core_fail": core_fail,
        "safety_score": score,
        "harm_type": harm,
        "defense_behavior": behavior,
        "explanation": why,
        "produced_by": producer,
    }
