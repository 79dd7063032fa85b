"""Built-in judges: ``rule`` (deterministic) and ``llm`` (any backend as the judge)."""

from __future__ import annotations

from ..hookspecs import hookimpl
from ..judges.llm import LLMJudge
from ..judges.rule import RuleJudge


@hookimpl
def register_judges(register) -> None:
    """Register the rule and LLM judges."""
    register(RuleJudge())
    register(LLMJudge())
