"""What a stage needs to run one work item, and the row it fills in."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...components import Endpoint, JudgeInstance, Oracle, Sandbox
from ..messages import ChatResponse
from ..planner import WorkItem

__all__ = ["StageContext"]


@dataclass
class StageContext:
    """One work item in flight, as every stage's ``run`` receives it (public as ``assay.api.StageContext``).

    What a stage reads: ``item`` (the work item: case id, endpoint, condition,
    seed, epoch, protocol; ``item.key()`` is the row's key), ``case`` (the
    case document), ``endpoint`` (the model under test: ``await
    endpoint.complete(ChatRequest(...))``, passing ``request_context(stage)``
    as the request's context), ``judge`` (the run's judge instance),
    ``policy`` (the condition's defense policy document), ``max_tokens`` and
    ``temperature`` (the run's generation settings), ``pack_root`` (where the
    case's fixtures are) and ``sandbox_factory`` with ``sandbox_options``
    (the run's sandbox, for stages that act on one) and ``oracles``.

    What a stage writes: ``row`` (the growing result row: its outcome goes in
    ``row["stages"][name]``, the conversation in ``row["transcript"]``, the
    answer in ``row["final_output"]``), ``prompt_texts`` (the prompts the
    model saw, which the judge and the validator's re-derivation read) and
    the usage of each model call through :meth:`add_usage`.

    ``budget`` holds the run's agent-loop budget overrides (model calls,
    wall time, context window); ``options`` the values of the stages' run
    options (:class:`assay.api.RunOption`): text, or for an endpoint option
    the endpoint it names, to call like ``endpoint``.
    """

    item: WorkItem
    case: Mapping[str, Any]
    endpoint: Endpoint
    judge: JudgeInstance | None  # the run's judge; None unless the stage declares it uses one
    policy: Mapping[str, Any]
    max_tokens: int
    temperature: float
    row: dict[str, Any] = field(default_factory=dict)
    prompt_texts: list[str] = field(default_factory=list)
    sandbox_factory: Sandbox | None = None  # None when no planned stage uses a sandbox
    sandbox_options: Mapping[str, str] = field(default_factory=dict)
    pack_root: Path = field(kw_only=True)
    oracles: Mapping[str, Oracle] = field(default_factory=dict)
    budget: Mapping[str, Any] = field(default_factory=dict)  # run-level overrides of the case's budget
    options: Mapping[str, Any] = field(default_factory=dict)
    #: What scripted agents need to answer: each stage's ``scripted`` answer, the case family's scripted rate.
    scripted: Mapping[str, Any] = field(default_factory=dict, repr=False)
    scripted_rate: float | None = None

    def request_context(self, stage: str) -> dict[str, Any]:
        """What scripted agents may read (never sent to a server): the case, the item, the stage, and how the
        stage says scripted agents answer it."""
        context: dict[str, Any] = {"case": self.case, "key": self.item.label(), "stage": stage}
        answer = self.scripted.get(stage)
        if answer is not None:
            context["scripted_answer"] = answer
        if self.scripted_rate is not None:
            context["scripted_rate"] = self.scripted_rate
        return context

    def add_usage(self, response: ChatResponse) -> None:
        """Accumulate a model call's tokens and latency into the row's usage."""
        usage = self.row["usage"]
        usage["prompt_tokens"] += response.prompt_tokens
        usage["completion_tokens"] += response.completion_tokens
        usage["model_calls"] += 1
        usage["wall_time_s"] = round(usage["wall_time_s"] + response.latency_s, 6)
