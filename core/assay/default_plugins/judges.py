"""Built-in judges: ``rule`` (deterministic) and ``llm`` (any backend as the judge)."""

from __future__ import annotations

from ..components import Judge
from ..hookspecs import Register, hookimpl
from ..judges.llm import LLMJudge
from ..judges.rule import RuleJudge


@hookimpl
def register_judges(register: Register) -> None:
    """Register the rule and LLM judges."""
    # Typed as the protocol so that mypy checks the built-ins satisfy it.
    judges: tuple[Judge, ...] = (RuleJudge(), LLMJudge())
    for judge in judges:
        register(judge)
