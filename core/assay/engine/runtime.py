"""The runtime of one run: plugins, pack, cases, endpoints, judge, policies; executes work items.

A :class:`Job` is plain data (picklable), so any executor, in this process or
on a Ray worker, can rebuild the same :class:`Runtime` from it and execute
work items into identical rows.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import InitVar, dataclass, field
from pathlib import Path
from typing import Any

from ..components import Backend, Defense, Endpoint, Family, JudgeInstance, Oracle, Sandbox, Stage
from ..errors import ConfinementError, PackError, SpecError, UsageError
from ..jsontext import json_safe
from ..judging import HostedJudge
from ..packs import Pack
from ..plugins import PluginHost, load_plugins
from ..policies import withhold
from ..schemas import CURRENT_SPEC_VERSION
from .cache import ResponseCache
from .conditions import PromptWatch, applies
from .messages import BackendError, ChatRequest, ChatResponse
from .planner import WorkItem
from .rowcheck import settle_row
from .specs import parse_spec
from .stages import stage_order
from .stages.context import StageContext

#: Parsed cases a runtime keeps (the most recently used); see :meth:`Runtime.case`.
CASES_KEPT = 512

__all__ = [
    "CASES_KEPT",
    "CachedEndpoint",
    "ENGINE_ENDPOINT_OPTIONS",
    "Job",
    "Runtime",
    "failure_message",
    "failure_type",
]

#: Endpoint options the engine reads itself and never passes to a backend: ``id`` names a run's endpoint (a stage
#: option naming an endpoint, such as the default "the run's first endpoint", carries its text whole, id included),
#: ``family`` its model family.
ENGINE_ENDPOINT_OPTIONS = frozenset({"family", "id"})


# An absolute path in an error message: the engine's box and store directories are host paths a row must not carry.
_HOST_PATH = re.compile(r"(?<![\w.~-])/[^\s'\"(),:;]+")


def failure_type(exc: BaseException) -> str:
    """The error type a row records for a stage that raised ``exc``.

    ``pack_error``: the case could not be laid down as the pack wrote it (the
    pack is at fault); ``confinement_error``: a box could not be built on
    this machine; ``stage_failure``: anything else (a bug to fix; the message
    says which). Each is an error row, run again by ``--retry-errors``.
    """
    if isinstance(exc, PackError | SpecError):
        return "pack_error"
    if isinstance(exc, ConfinementError):
        return "confinement_error"
    return "stage_failure"


def failure_message(exc: BaseException) -> str:
    """What a row records of a stage that failed: the error's type and message, with host paths taken out.

    Whatever an agent left can break a stage (that is a bug to fix, and the
    row says which); the message must still not publish where the engine
    keeps its boxes and stores, nor anything they are named after.
    """
    return _HOST_PATH.sub("<path>", f"{type(exc).__name__}: {exc}")[:2000]


@dataclass(frozen=True)
class Job:
    """Everything needed to execute work items, as plain data."""

    pack_root: str
    endpoints: tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...]  # (id, backend, options)
    judge: tuple[str, tuple[tuple[str, str], ...]]
    stages: tuple[str, ...]
    cache_path: str | None
    max_tokens: int = 256
    temperature: float = 0.0
    environ: tuple[tuple[str, str], ...] = ()  # plugin switches in force when the run was planned
    sandbox: tuple[str, tuple[tuple[str, str], ...]] = ("local", ())
    budget: tuple[tuple[str, str], ...] = ()  # run-level agent-loop budget overrides, values as JSON
    options: tuple[tuple[str, str], ...] = ()  # the stages' run options that have a value (see RunOption)


class CachedEndpoint:
    """An endpoint whose answers go through the response cache (keyed by the canonical request)."""

    def __init__(self, endpoint: Endpoint, cache: ResponseCache | None) -> None:
        self.inner = endpoint
        self.id = endpoint.id
        self.scripted = bool(getattr(endpoint, "scripted", False))
        self._cache = None if self.scripted else cache  # scripted agents are deterministic and free

    def describe(self) -> dict[str, Any]:
        """The wrapped endpoint's manifest entry."""
        return self.inner.describe()

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """A cached answer, or a fresh one that is then cached."""
        if self._cache is None:
            return (await self.inner.complete(request)).bounded()
        key = request.cache_key(self.id, getattr(self.inner, "model", None))
        cached = self._cache.get(key)
        if cached is not None:
            return cached.bounded()
        response = (await self.inner.complete(request)).bounded()
        self._cache.put(key, self.id, response)
        return response

    async def aclose(self) -> None:
        """Close the wrapped endpoint."""
        await self.inner.aclose()


@dataclass
class Runtime:
    """Plugins, pack, endpoints and judge of one run, built from a :class:`Job`.

    ``plugins`` reuses a host the caller already loaded under the job's plugin
    switches (the driver of a local run: plugins load once per command); a
    worker elsewhere (Ray) passes none and loads them itself.
    """

    job: Job
    plugins: InitVar[PluginHost | None] = None
    host: PluginHost = field(init=False)
    pack: Pack = field(init=False)
    endpoints: dict[str, CachedEndpoint] = field(init=False)
    judge: JudgeInstance | None = field(init=False)  # None when no planned stage uses the judge
    #: Each stage option's value: its text, or the endpoint an endpoint option names.
    options: dict[str, Any] = field(default_factory=dict, init=False)
    _cases: dict[str, dict[str, Any]] = field(default_factory=dict, init=False)
    _cache: ResponseCache | None = field(default=None, init=False)
    _stages: dict[str, Stage] = field(default_factory=dict, init=False)
    _stage_order: list[str] = field(default_factory=list, init=False)

    def __post_init__(self, plugins: PluginHost | None) -> None:
        self.host = plugins if plugins is not None else load_plugins(environ=dict(self.job.environ) or None)
        registry = self.host.registry
        self.pack = Pack.from_directory(self.job.pack_root)
        self._cache = ResponseCache(Path(self.job.cache_path)) if self.job.cache_path else None
        self.endpoints = {}
        for endpoint_id, backend_name, options in self.job.endpoints:
            self.endpoints[endpoint_id] = CachedEndpoint(
                self._make_endpoint(endpoint_id, backend_name, dict(options)), self._cache
            )
        self._stages = registry.items("stages")
        self._stage_order = stage_order(self._stages)
        self._scripted = {name: stage.scripted for name, stage in self._stages.items() if stage.scripted is not None}
        endpoint_options = {o.name for stage in self._stages.values() for o in stage.options if o.endpoint}
        judge_option_names = {o.name for stage in self._stages.values() for o in stage.options if o.judge}
        for name, value in self.job.options:
            if name in judge_option_names:
                self.options[name] = self._make_judge(value)
            elif name in endpoint_options:
                spec = parse_spec(value, what=name.replace("_", " "))
                endpoint_id = name.replace("_", "-")
                self.options[name] = CachedEndpoint(
                    self._make_endpoint(endpoint_id, spec.plugin, dict(spec.options)), self._cache
                )
            else:
                self.options[name] = value
        judge_name, judge_options = self.job.judge
        judged = any("judge" in self._stages[s].uses for s in self.job.stages if s in self._stages)
        self.judge = self._make_judge(judge_name, dict(judge_options)) if judged else None
        self._index = self.pack.case_index()
        sandbox_name, sandbox_options = self.job.sandbox
        self.sandbox: Sandbox | None = registry.get("sandboxes", sandbox_name)
        if self.sandbox is None and any(
            "sandbox" in self._stages[s].uses for s in self.job.stages if s in self._stages
        ):
            raise UsageError(f"sandbox {sandbox_name!r} is not a registered plugin (see 'assay plugins')")
        self.sandbox_options = dict(sandbox_options)
        self.oracles: dict[str, Oracle] = registry.items("oracles")

    def _make_judge(self, spec: str, options: dict[str, str] | None = None) -> JudgeInstance:
        """A judge instance from a spec (``rule``, ``llm:backend=...``), its endpoints cached like the run's."""
        if options is None:
            parsed = parse_spec(spec, what="judge")
            spec, options = parsed.plugin, dict(parsed.options)
        judge = self.host.registry.get("judges", spec)
        if judge is None:
            raise UsageError(f"judge {spec!r} is not a registered plugin (see 'assay plugins')")
        instance: JudgeInstance = judge.instance(
            options,
            lambda backend, backend_options: CachedEndpoint(
                self._make_endpoint(f"judge-{backend}", backend, dict(backend_options)), self._cache
            ),
        )
        # The host, not the judge, says who judged (see assay.judging).
        registration = self.host.registry.registration("judges", spec)
        assert registration is not None
        return HostedJudge(instance, registration)

    def _make_endpoint(self, endpoint_id: str, backend_name: str, options: dict[str, str]) -> Endpoint:
        backend: Backend | None = self.host.registry.get("backends", backend_name)
        if backend is None:
            raise UsageError(f"backend {backend_name!r} is not a registered plugin (see 'assay plugins')")
        # ``family`` is the engine's (it groups endpoints for paired statistics), not the backend's.
        return backend.endpoint(endpoint_id, {k: v for k, v in options.items() if k not in ENGINE_ENDPOINT_OPTIONS})

    def case(self, case_id: str) -> dict[str, Any]:
        """A case's data, parsed on first use and kept while it is among the most recently used.

        Items come case by case in plan order, so a few hundred cases kept
        parse each case once; a pack of a million cases is never all held.
        """
        case = self._cases.pop(case_id, None)
        if case is None:
            from ..documents import load_document

            entry = self._index[case_id]
            case = load_document(self.pack.root / entry["path"]).data
            if len(self._cases) >= CASES_KEPT:
                del self._cases[next(iter(self._cases))]  # the least recently used (dicts keep insertion order)
        self._cases[case_id] = case
        return case

    def policy(self, condition: str) -> Mapping[str, Any]:
        """The defense policy document of a condition."""
        defense: Defense | None = self.host.registry.get("defenses", condition)
        if defense is None:
            raise UsageError(f"defense {condition!r} is not a registered plugin")
        return defense.document

    def stages_for(self, case: Mapping[str, Any]) -> list[str]:
        """The run's stages that this case's family supports, in stage order."""
        family: Family | None = self.host.registry.get("families", case.get("family"))
        supported = set(family.stages) if family is not None else set()
        return [stage for stage in self._stage_order if stage in self.job.stages and stage in supported]

    async def execute(self, item: WorkItem) -> dict[str, Any]:
        """Run every applicable stage of one work item; returns its result row."""
        case = self.case(item.case_id)
        endpoint = self.endpoints[item.endpoint]
        stages = self.stages_for(case)
        policy = self.policy(item.condition)
        placement = str(policy.get("placement", "none"))
        # The engine watches what each stage sends: a stage that applies the condition's placement must carry it.
        watch = PromptWatch(endpoint, policy, frozenset(s for s in stages if applies(self._stages[s], placement)))
        ctx = StageContext(
            item,
            case,
            watch,  # an Endpoint in every member a stage reads
            self.judge,
            policy,
            self.job.max_tokens,
            self.job.temperature,
            pack_root=self.pack.root,
        )
        ctx.sandbox_factory, ctx.sandbox_options = self.sandbox, self.sandbox_options
        ctx.oracles, ctx.options = self.oracles, self.options
        ctx.scripted = self._scripted
        family: Family | None = self.host.registry.get("families", case.get("family"))
        ctx.scripted_rate = family.scripted_rate if family is not None else None
        ctx.budget = {key: json.loads(value) for key, value in self.job.budget}
        ctx.row = {
            "spec_version": CURRENT_SPEC_VERSION,
            "key": item.key(),
            "case_digest": self._index[item.case_id]["sha256"],
            "scripted": endpoint.scripted,
            "transcript": {"messages": []},
            "final_output": None,
            "stages": {},
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "model_calls": 0, "wall_time_s": 0.0},
            "errors": [],
        }
        for stage in stages:
            try:
                await self._stages[stage].run(ctx)
            except BackendError as exc:
                ctx.row["errors"].append(
                    {"stage": stage, "type": exc.kind, "message": str(exc), "attempts": exc.attempts}
                )
                break
            except UsageError:
                # The run's settings cannot work (a judge without the role a stage needs, a plugin switched off):
                # the same for every item, said once, in one line, rather than as an error row per item.
                raise
            except Exception as exc:  # noqa: BLE001 - nothing an agent, a pack or a plugin leaves may end the run
                # The item is recorded as failed in this stage, with the reason, and every other item goes on; a
                # partial outcome the stage left is not a result.
                ctx.row["stages"].pop(stage, None)
                ctx.row["errors"].append({"stage": stage, "type": failure_type(exc), "message": failure_message(exc)})
                break
        if watch.sent:
            ctx.row["prompts_sent"] = watch.sent
        ctx.row["errors"] += watch.errors(item.condition)
        # A hash-only condition's wording never reaches a row (transcripts carry its marker).
        row: dict[str, Any] = ctx.row
        if ctx.policy.get("disclosure") == "hash_only":
            row = withhold(json_safe(row), ctx.policy)  # bounded depth first: withhold recurses
        identity = {
            "key": item.key(),
            "case_digest": self._index[item.case_id]["sha256"],
            "scripted": endpoint.scripted,
        }
        return settle_row(row, self._stages, self.job.stages, identity)

    async def aclose(self) -> None:
        """Close endpoints and the cache."""
        for endpoint in self.endpoints.values():
            await endpoint.aclose()
        for value in self.options.values():
            if isinstance(value, CachedEndpoint):
                await value.aclose()
            elif getattr(value, "endpoint", None) is not None:  # a judge option's judge that calls a model
                await value.endpoint.aclose()
        # A judge that calls a model keeps its endpoint (an optional member of JudgeInstance).
        judge_endpoint = getattr(self.judge, "endpoint", None) if self.judge is not None else None
        if judge_endpoint is not None:
            await judge_endpoint.aclose()
        if self._cache is not None:
            self._cache.close()
