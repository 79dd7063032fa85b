"""``assay run``: plan, execute (resumably), seal, zip and self-validate a run.

Layout of ``--out DIR``::

    DIR/bundle/        the sealed bundle (bundle.json, run.json, rows.jsonl, metrics.json)
    DIR/bundle.zip     the same, zipped reproducibly
    DIR/state/         run identity, the row log and the response cache (what --resume needs), and
                       the lock that keeps a second run out of DIR while this one lives

Nothing is written before every check that can refuse the run has passed
(options, plugins, the sandbox, each endpoint's preflight request, the run
directory's identity), so a corrected command is never refused because of
what a failed one left behind.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson

from .. import __version__
from ..bundle import METRICS_FILE, ROWS_FILE, RUN_FILE, seal_bundle, write_bytes_atomic, write_json_atomic, zip_bundle
from ..components import (
    FIRST_ENDPOINT,
    OWN_ENDPOINT,
    Executor,
    MetricContext,
    MetricValue,
    RunCheck,
    RunOption,
    Stage,
)
from ..errors import PackError, PluginError, RunLocked, UsageError
from ..executors.local import LocalExecutor
from ..extensions import stage_schemas, usable_outcome_schemas
from ..hashing import digest_document
from ..health import DEFAULT_MAX_ERROR_RATE, EndpointHealth, HealthTally, error_rate_problems, health_warnings
from ..packs import Pack, find_manifest
from ..plugins import PluginHost, load_plugins
from ..schemas import CURRENT_SPEC_VERSION, spec_schemas
from ..summary import SummaryPass, summary_document
from ..validate import Report, validate_path
from .conditions import unapplied_conditions
from .planner import Plan, RunnableCases, WorkItem, build_plan, family_of, one_per_family, parse_sample, select_cases
from .preflight import preflight_endpoints
from .progress import Progress
from .rowlog import RowLog, drop_error_rows
from .runtime import ENGINE_ENDPOINT_OPTIONS, Job, Runtime
from .specs import ComponentSpec, parse_spec
from .stages import stage_order

__all__ = ["RunOutcome", "RunSettings", "execute_run", "run_timestamp"]

_PLUGIN_SWITCHES = ("ASSAY_PLUGINS", "ASSAY_BLOCK_PLUGINS", "ASSAY_DISABLE_PLUGIN_AUTOLOAD")


@dataclass
class RunSettings:
    """What ``assay run`` was asked to do (from options and/or a run file)."""

    pack: str
    endpoints: Sequence[str]
    out: Path
    defenses: Sequence[str] = ()  # none: every registered default condition
    seeds: Sequence[int] = (0,)
    stages: Sequence[str] | None = None
    judge: str = "calibrated"
    limit: int | None = None
    sample: str | None = None
    sample_seed: int = 0
    concurrency: int = 16
    resume: bool = False
    executor: str = "local"
    epochs: int = 1
    max_tokens: int = 256
    temperature: float = 0.0
    progress: bool = True
    sandbox: str = "local"
    max_model_calls: int | None = None
    wall_time_s: float | None = None
    context_window: int | None = None
    #: Values of the stages' run options (see :class:`assay.api.RunOption`), by option name.
    stage_options: Mapping[str, str] = field(default_factory=dict)
    #: Send every endpoint one request before the run (``--no-preflight`` turns it off).
    preflight: bool = True
    #: The share of an endpoint's rows that may be error rows before the run fails (``--max-error-rate``).
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE
    #: On resume, run the work items whose rows are error rows again (``--retry-errors``).
    retry_errors: bool = False

    def __post_init__(self) -> None:
        for name, value, least in (
            ("concurrency", self.concurrency, 1),
            ("epochs", self.epochs, 1),
            ("max-tokens", self.max_tokens, 1),
            ("limit", self.limit, 1),
            ("sample-seed", self.sample_seed, 0),
        ):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < least):
                raise UsageError(f"--{name} {value!r}: expected a whole number >= {least}")
        if not 0 <= self.max_error_rate <= 1:
            raise UsageError(f"--max-error-rate {self.max_error_rate!r}: expected a share between 0 and 1")
        if self.retry_errors and not self.resume:
            raise UsageError("--retry-errors goes with --resume (it runs a finished run's error rows again)")

    def budget(self) -> dict[str, Any]:
        """The run-level agent-loop budget shared by every compared condition (None: each case's own)."""
        policy = {"strategy": "sliding_window", "keep_last_turns": self.context_window} if self.context_window else None
        return {"max_model_calls": self.max_model_calls, "wall_time_s": self.wall_time_s, "context_policy": policy}


@dataclass
class RunOutcome:
    """Where the run's results are and how they fared."""

    bundle: Path
    archive: Path
    rows: int
    error_rows: int
    resumed_rows: int
    report: Report
    excluded_cases: dict[str, int] = field(default_factory=dict)
    #: Work items whose error rows were dropped to run again (``--retry-errors``).
    retried_rows: int = 0
    #: The health checks' warnings (error rows, degenerate answers; see :mod:`assay.health`).
    warnings: tuple[str, ...] = ()
    #: Endpoints whose error rows exceed ``max_error_rate`` (the run fails; the bundle is kept).
    failures: tuple[str, ...] = ()


def resolve_pack(text: str, host: PluginHost) -> Pack:
    """The pack a ``--pack`` value names: a pack directory, or an installed pack's ``NAME`` or ``NAME@VERSION``
    (UsageError naming the installed ones otherwise)."""
    path = Path(text)
    if find_manifest(path) is not None:
        return Pack.from_directory(path)
    name, _, version = text.partition("@")
    pack: Pack | None = host.registry.get("packs", name)
    if pack is None:
        raise UsageError(
            f"pack {name!r} is not installed (installed: {', '.join(host.registry.names('packs')) or 'none'})"
        )
    if version and pack.version != version:
        raise UsageError(f"pack {name} is installed at version {pack.version}, not {version}")
    return pack


def _endpoint_specs(texts: Sequence[str], host: PluginHost) -> list[tuple[str, ComponentSpec]]:
    if not texts:
        raise UsageError("name at least one --endpoint (e.g. scripted:mixed, local, openai:model=NAME,base_url=URL)")
    result, seen = [], set()
    for text in texts:
        spec = parse_spec(text, what="endpoint")
        if host.registry.get("backends", spec.plugin) is None:
            raise UsageError(
                f"endpoint {text!r}: backend {spec.plugin!r} is not a registered plugin "
                f"({', '.join(host.registry.names('backends'))})"
            )
        options = dict(spec.options)
        endpoint_id = options.pop("id", None) or "-".join(
            filter(None, [spec.plugin, options.get("mode"), options.get("model")])
        )
        endpoint_id = "".join(c if c.isalnum() or c in "._:@+-" else "-" for c in endpoint_id)
        if endpoint_id in seen:
            raise UsageError(f"two endpoints have the id {endpoint_id!r}; give them distinct id= options")
        seen.add(endpoint_id)
        result.append((endpoint_id, ComponentSpec(spec.plugin, options, text)))
    return result


def _stages(requested: Sequence[str] | None, families: set[str], host: PluginHost) -> list[str]:
    stages = host.registry.items("stages")
    order = stage_order(stages)
    supported = set()
    for family in families:
        component = host.registry.get("families", family)
        supported |= set(component.stages if component else ())
    if requested:
        for stage in requested:
            if stage not in stages:
                raise UsageError(
                    f"unknown stage {stage!r} (registered stages: {', '.join(order)}; a stage from a plugin "
                    "needs its distribution installed)"
                )
            if stage not in supported:
                raise UsageError(f"no case of this pack supports stage {stage!r}")
        chosen = set(requested)
    else:
        chosen = supported & set(stages)
        if not chosen:
            raise UsageError(
                f"no registered stage runs this pack's cases (they support {', '.join(sorted(supported))})"
            )
    for stage in sorted(chosen, key=order.index):
        missing = [needed for needed in stages[stage].needs if needed not in chosen]
        if missing:
            raise UsageError(
                f"the {stage} stage needs the {missing[0]} stage (it reads its outcomes): plan both, or neither"
            )
    return [stage for stage in order if stage in chosen]


def _run_manifest(
    run_id: str,
    pack: Pack,
    plan: Plan,
    host: PluginHost,
    runtime: Runtime,
    settings: RunSettings,
    executor: ComponentSpec,
    options: dict[str, dict[str, str]],
) -> dict[str, Any]:
    planned = [host.registry.get("stages", name) for name in plan.stages]
    judged = [stage for stage in planned if stage is not None and "judge" in stage.uses]
    assert runtime.judge is not None or not judged  # the runtime builds the judge when a planned stage uses it
    sandboxed = any(stage is not None and "sandbox" in stage.uses for stage in planned)
    prompts = [dict(entry) for stage in planned if stage is not None and stage.prompts for entry in stage.prompts()]
    own: dict[str, Any] = {}  # options the spec gives a manifest member of their own (see RunOption.spec_member)
    others: dict[str, Any] = {}
    for option in _planned_options(planned):
        value = runtime.options.get(option.name)
        if option.recorded and value is not None:
            (own if option.spec_member else others)[option.name] = value.describe() if option.endpoint else value
    manifest = {
        "spec_version": CURRENT_SPEC_VERSION,
        "run_id": run_id,
        "engine": {
            "name": "assay",
            "version": __version__,
            "python": platform.python_version(),
            "platform": platform.system().lower(),
        },
        "pack": {"name": pack.name, "version": pack.version, "digest": pack.claimed_digest},
        "plan": plan.to_json(),
        # Only a run planning a plugin's stage has the member: every other manifest stays as spec 1.0 wrote it.
        **({"stage_schemas": extensions} if (extensions := stage_schemas(host.registry, plan.stages)) else {}),
        "plugins": host.describe(),
        "endpoints": [{**runtime.endpoints[e].describe(), "options": options[e]} for e in plan.endpoints],
        "judges": [_judge_of(stage, runtime).describe(stage.name) for stage in judged],
        "conditions": [_condition_entry(c, runtime.policy(c)) for c in plan.conditions],
        **({"prompts": prompts} if prompts else {}),
        "seeds": list(plan.seeds),
        "budgets": {"max_tokens": settings.max_tokens, **settings.budget()},
        "executor": {"name": executor.plugin, "concurrency": settings.concurrency, "params": dict(executor.options)},
        "sandbox": settings.sandbox if sandboxed else None,
        **({"stage_options": others} if others else {}),
    }
    members = spec_schemas().schema("run_manifest")["properties"]
    for name, value in own.items():
        # Only a member the spec defines and the engine does not write itself: an option never overwrites provenance.
        if name not in members or name in manifest:
            raise PluginError(f"run option {name!r} claims a run manifest member the spec does not give it")
        manifest[name] = value
    return manifest


def _judge_of(stage: Stage, runtime: Runtime) -> Any:
    """The judge a stage's outcomes were labelled with: its own judge option's, when the run gave one, else the
    run's ``--judge``."""
    for option in stage.options:
        if option.judge and runtime.options.get(option.name) is not None:
            return runtime.options[option.name]
    return runtime.judge


def _planned_options(planned: Sequence[Stage | None]) -> list[RunOption]:
    """The run options of the planned stages, each once (stages may share an option), in stage order."""
    found: dict[str, RunOption] = {}
    for stage in planned:
        for option in stage.options if stage is not None else ():
            found.setdefault(option.name, option)
    return list(found.values())


def _condition_entry(condition: str, policy: Mapping[str, Any]) -> dict[str, Any]:
    """A manifest entry: prompt conditions carry their category (a hash-only one is known by it and its digest)."""
    kind = policy.get("role") if policy.get("role") in ("prompt_condition", "permission_baseline") else "defense"
    entry = {"id": condition, "kind": kind, "digest": policy["digest"]}
    if policy.get("category"):
        entry["category"] = policy["category"]
    return entry


def _option_values(
    given: Mapping[str, str], stages: Sequence[str], host: PluginHost, endpoints: Sequence[str]
) -> dict[str, str | None]:
    """The planned stages' run options with their values (given, else each option's default), checked: a value
    outside an option's choices, an endpoint option naming no registered backend, or an option no registered stage
    has is a usage error. An endpoint option's ``first`` is the run's first ``--endpoint`` (by its spec, so the
    manifest records which), and ``self`` unsets it (each item's own endpoint)."""
    known = {option.name: option for stage in host.registry.items("stages").values() for option in stage.options}
    for name in given:
        if name not in known:
            raise UsageError(f"--{name.replace('_', '-')}: no registered stage has this option")
    values: dict[str, str | None] = {}
    for option in _planned_options([host.registry.get("stages", name) for name in stages]):
        value = given.get(option.name, option.default)
        flag = f"--{option.name.replace('_', '-')}"
        if value is not None and option.choices is not None and value not in option.choices:
            raise UsageError(f"{flag} {value!r}: expected {' or '.join(option.choices)}")
        if value is not None and option.judge:
            judge = parse_spec(value, what="judge").plugin
            if host.registry.get("judges", judge) is None:
                raise UsageError(
                    f"{flag} {value!r}: judge {judge!r} is not a registered plugin "
                    f"({', '.join(host.registry.names('judges'))})"
                )
        if option.endpoint and value == OWN_ENDPOINT:
            value = None
        elif option.endpoint and value == FIRST_ENDPOINT:
            value = endpoints[0]
        if value is not None and option.endpoint:
            backend = parse_spec(value, what=option.name.replace("_", " ")).plugin
            if host.registry.get("backends", backend) is None:
                raise UsageError(
                    f"{flag} {value!r}: backend {backend!r} is not a registered plugin "
                    f"({', '.join(host.registry.names('backends'))})"
                )
        values[option.name] = value
    return values


def _default_conditions(index: Mapping[str, Mapping[str, Any]], host: PluginHost) -> list[str]:
    """The conditions of a run that names none: the union of its families' own (``Family.conditions``) when every
    family of the pack names some, else every registered default condition."""
    names = {family_of(index, case_id) for case_id in one_per_family(index)}
    families = [host.registry.get("families", name) for name in sorted(names)]
    named = [family.conditions for family in families if family is not None and family.conditions]
    if families and len(named) == len(families):
        return list(dict.fromkeys(name for conditions in named for name in conditions))
    defaults = sorted(name for name, d in host.registry.items("defenses").items() if d.default)
    if not defaults:
        raise UsageError("no condition given and no registered condition is a default: name one with --condition")
    return defaults


def _check_placements(conditions: Sequence[str], stages: Sequence[str], host: PluginHost) -> None:
    """Refuse a condition that places text no planned stage applies (see :mod:`assay.engine.conditions`): the run
    would present a comparison of conditions whose prompts never differed."""
    planned = [stage for name in stages if (stage := host.registry.get("stages", name)) is not None]
    policies = []
    for condition in conditions:
        defense = host.registry.get("defenses", condition)
        if defense is not None:
            policies.append((condition, defense.document))
    problems = unapplied_conditions(policies, planned)
    if problems:
        raise UsageError(problems[0])


def execute_run(settings: RunSettings, *, host: PluginHost | None = None) -> RunOutcome:
    """Run (or resume) a whole run and return where its sealed bundle is."""
    host = host or load_plugins()
    pack = resolve_pack(settings.pack, host)
    problem = pack.integrity_problem()
    if problem is not None:
        # Invalid input, not a usage error: the pack's files do not match what it claims (exit 1).
        raise PackError(f"pack {pack.name} is not intact: {problem} (run 'assay validate {pack.root}')")
    # A pack the validator refuses never runs: what it refuses is what a run could not lay down or score safely.
    from ..validate import require_valid_pack

    require_valid_pack(pack.root, str(pack.claimed_digest), host)
    endpoints = _endpoint_specs(settings.endpoints, host)
    index = pack.case_index()
    if not settings.defenses:
        settings = replace(settings, defenses=_default_conditions(index, host))
    for defense in settings.defenses:
        if host.registry.get("defenses", defense) is None:
            raise UsageError(
                f"defense {defense!r} is not a registered plugin ({', '.join(host.registry.names('defenses'))})"
            )
    judge = parse_spec(settings.judge, what="judge")
    sandbox_spec = parse_spec(settings.sandbox, what="sandbox")
    executor_spec = parse_spec(settings.executor, what="executor")
    executor: Executor | None = host.registry.get("executors", executor_spec.plugin)
    if executor is None:
        raise UsageError(
            f"executor {executor_spec.plugin!r} is not a registered plugin "
            f"({', '.join(host.registry.names('executors'))})"
        )

    stages = _stages(settings.stages, {entry["family"] for entry in index.values()}, host)
    usable_outcome_schemas(host.registry, stages)
    option_values = _option_values(settings.stage_options, stages, host, list(settings.endpoints))
    runs = {name: bool((family := host.registry.get("families", name)) and set(family.stages) & set(stages))
            for name in {family_of(index, case_id) for case_id in one_per_family(index)}}  # fmt: skip
    runnable = RunnableCases(index, frozenset(name for name, yes in runs.items() if yes))  # case id -> family
    excluded: dict[str, int] = {}  # family -> cases the chosen stages do not apply to
    for case_id in index:
        family_name = family_of(index, case_id)
        if not runs[family_name]:
            excluded[family_name] = excluded.get(family_name, 0) + 1
    cases, sampling = select_cases(
        runnable, limit=settings.limit, sample=parse_sample(settings.sample), sample_seed=settings.sample_seed
    )
    plan = build_plan(
        cases,
        [e for e, _ in endpoints],
        list(settings.defenses),
        list(settings.seeds),
        stages,
        epochs=settings.epochs,
        sampling=sampling,
    )

    out = settings.out
    state = out / "state"
    environ = tuple((k, os.environ[k]) for k in _PLUGIN_SWITCHES if k in os.environ)
    job = Job(
        pack_root=str(pack.root.resolve()),
        endpoints=tuple((e, spec.plugin, tuple(sorted(spec.options.items()))) for e, spec in endpoints),
        judge=(judge.plugin, tuple(sorted(judge.options.items()))),
        stages=tuple(stages),
        cache_path=str((state / "cache.sqlite").resolve()),
        max_tokens=settings.max_tokens,
        temperature=settings.temperature,
        environ=environ,
        sandbox=(sandbox_spec.plugin, tuple(sorted(sandbox_spec.options.items()))),
        budget=tuple(sorted((k, json.dumps(v, sort_keys=True)) for k, v in settings.budget().items() if v is not None)),
        options=tuple(sorted((k, v) for k, v in option_values.items() if v is not None)),
    )
    planned = [host.registry.get("stages", name) for name in stages]
    if any(stage is not None and "judge" in stage.uses for stage in planned) and (
        host.registry.get("judges", judge.plugin) is None
    ):
        raise UsageError(
            f"judge {judge.plugin!r} is not a registered plugin ({', '.join(host.registry.names('judges'))})"
        )
    if any(stage is not None and "sandbox" in stage.uses for stage in planned):
        sandbox = host.registry.get("sandboxes", sandbox_spec.plugin)
        if sandbox is None:
            raise UsageError(
                f"sandbox {sandbox_spec.plugin!r} is not a registered plugin "
                f"({', '.join(host.registry.names('sandboxes'))})"
            )
        if hasattr(sandbox, "check"):
            sandbox.check()
        if hasattr(sandbox, "validate_options"):  # optional: a bad option is a usage error before anything runs
            sandbox.validate_options(dict(sandbox_spec.options))
    check = RunCheck(option_values, tuple(settings.defenses), host.registry)
    for stage in planned:
        if stage is not None and stage.preflight is not None:
            stage.preflight(check)  # one line, before anything runs (a host that cannot confine, say)
    # After the stages' own checks, whose refusals say more (a plugin that takes no prompt defenses, say).
    _check_placements(settings.defenses, stages, host)
    identity = {
        "pack": {"name": pack.name, "version": pack.version, "digest": pack.claimed_digest},
        "plan": plan.to_json(),
        "endpoints": [[e, spec.to_json()] for e, spec in endpoints],
        "judge": judge.to_json(),
        "sandbox": sandbox_spec.to_json() if any(s is not None and "sandbox" in s.uses for s in planned) else None,
        "max_tokens": settings.max_tokens,
        "temperature": settings.temperature,
        **({"budget": settings.budget()} if any(v is not None for v in settings.budget().values()) else {}),
        **({"options": given} if (given := {k: v for k, v in sorted(option_values.items()) if v is not None}) else {}),
    }
    _check_identity(out, state, identity, settings.resume)
    run_timestamp()  # a malformed SOURCE_DATE_EPOCH is a usage error now, not after the run
    judged = any(stage is not None and "judge" in stage.uses for stage in planned)
    factories = _endpoint_factories(endpoints, option_values, host, settings.judge if judged else None)
    for _, make in factories:
        make()  # a backend refusing its options (UsageError) refuses the run here, before anything is written
    if settings.preflight:
        preflight_endpoints(factories)
    # Every check has passed: from here on the run writes.
    lock = _lock(out, state)
    try:
        return _execute(settings, host, pack, plan, job, endpoints, executor, executor_spec, excluded, identity)
    finally:
        os.close(lock)


def run_timestamp() -> str:
    """Now, RFC 3339 UTC to the second; ``SOURCE_DATE_EPOCH`` instead when set (a reproducible build's time), so
    the same scripted run gives a byte-identical bundle."""
    import datetime
    import time

    fixed = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    try:
        seconds = int(fixed) if fixed else int(time.time())
    except ValueError:
        raise UsageError(f"SOURCE_DATE_EPOCH={fixed!r}: expected whole seconds since 1970") from None
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _started_at(state: Path) -> str:
    """When the run first started: recorded in its state on the first invocation, kept by every resume."""
    path = state / "started_at"
    try:
        recorded = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        recorded = ""
    if len(recorded) == 20 and recorded.endswith("Z"):
        return recorded
    started = run_timestamp()
    write_bytes_atomic(path, started.encode("ascii"))
    return started


def _check_identity(out: Path, state: Path, identity: Mapping[str, Any], resume: bool) -> None:
    """Refuse a run directory holding another run, or one that cannot be resumed (nothing is written)."""
    identity_path = state / "identity.json"
    try:
        if out.exists() and not out.is_dir():
            raise UsageError(f"--out {out}: not a directory; choose another --out")
        if identity_path.exists():
            if not resume:
                raise UsageError(f"{out} already holds a run; pass --resume to continue it, or choose another --out")
            previous = json.loads(identity_path.read_text())
            if previous != identity:
                raise UsageError(f"{out} holds a different run (its plan or settings differ); choose another --out")
        elif resume and (state / ROWS_FILE).exists():
            raise UsageError(f"{out}: the run state has no identity.json; cannot resume safely")
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot read it ({exc.strerror or exc}); choose another --out") from None
    except ValueError:
        raise UsageError(f"{identity_path}: not a run identity; choose another --out") from None


def _judge_endpoints(spec_text: str, host: PluginHost) -> list[tuple[str, str, dict[str, str]]]:
    """The endpoints a judge spec would build (an ``llm`` judge's backend), without building them: the judge
    plugin is asked for an instance whose ``make_endpoint`` only records what it was asked for. A judge that
    refuses its options refuses the run here (UsageError)."""
    spec = parse_spec(spec_text, what="judge")
    plugin = host.registry.get("judges", spec.plugin)
    wanted: list[tuple[str, str, dict[str, str]]] = []
    if plugin is None:
        return wanted

    def record(backend: str, options: Mapping[str, str]) -> None:
        if host.registry.get("backends", backend) is None:
            raise UsageError(f"judge {spec_text!r}: backend {backend!r} is not a registered plugin")
        wanted.append((f"judge-{backend}", backend, dict(options)))

    plugin.instance(dict(spec.options), record)
    return wanted


def _endpoint_factories(
    endpoints: Sequence[tuple[str, ComponentSpec]],
    option_values: Mapping[str, str | None],
    host: PluginHost,
    judge: str | None = None,
) -> list[tuple[str, Any]]:
    """(id, factory) of every endpoint the run will call: its --endpoint ones, its stages' endpoint options and
    the backends of its judges (``judge``, the run's, when a planned stage uses it, and judge options)."""
    stage_options = [option for stage in host.registry.items("stages").values() for option in stage.options]
    endpoint_options = {option.name for option in stage_options if option.endpoint}
    judge_options = {option.name for option in stage_options if option.judge}
    specs = [(endpoint_id, spec.plugin, dict(spec.options)) for endpoint_id, spec in endpoints]
    for name, value in sorted(option_values.items()):
        if name in endpoint_options and value is not None and value not in {s.text for _, s in endpoints}:
            parsed = parse_spec(value, what=name.replace("_", " "))
            specs.append((name.replace("_", "-"), parsed.plugin, dict(parsed.options)))
    judges = [judge] if judge else []
    judges += [value for name, value in sorted(option_values.items()) if name in judge_options and value]
    for text in dict.fromkeys(judges):
        for found in _judge_endpoints(text, host):
            if found not in specs:
                specs.append(found)

    def factory(endpoint_id: str, backend_name: str, options: dict[str, str]) -> Any:
        backend = host.registry.get("backends", backend_name)
        assert backend is not None  # the run checked every backend name before
        return lambda: backend.endpoint(
            endpoint_id, {k: v for k, v in options.items() if k not in ENGINE_ENDPOINT_OPTIONS}
        )

    return [(endpoint_id, factory(endpoint_id, backend, options)) for endpoint_id, backend, options in specs]


def _lock(out: Path, state: Path) -> int:
    """Create the run directory and hold its lock for the run's life (released when the process ends, too).

    A second ``assay run`` in the same ``--out`` (a ``--resume`` typed while the first still runs, say) would
    send every call again and interleave rows: it is refused, naming the process that holds the directory.
    """
    import fcntl

    try:
        state.mkdir(parents=True, exist_ok=True)
        fd = os.open(state / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot write there ({exc.strerror or exc}); choose another --out") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
        os.close(fd)
        raise RunLocked(
            f"{out} is in use by another assay run (pid {holder}); wait for it to end, or choose another --out"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def _execute(
    settings: RunSettings,
    host: PluginHost,
    pack: Pack,
    plan: Plan,
    job: Job,
    endpoints: Sequence[tuple[str, ComponentSpec]],
    executor: Executor,
    executor_spec: ComponentSpec,
    excluded: dict[str, int],
    identity: Mapping[str, Any],
) -> RunOutcome:
    """Run the pending work items under the lock, then seal, zip and validate the bundle."""
    out = settings.out
    state, bundle_dir = out / "state", out / "bundle"
    run_id = "run-" + digest_document(identity)[7:23]
    try:
        write_json_atomic(state / "identity.json", identity)
        retried = drop_error_rows(state / ROWS_FILE) if settings.retry_errors else 0
        log = RowLog(state / ROWS_FILE, plan.position, len(plan))
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot write there ({exc.strerror or exc}); choose another --out") from None
    resumed = log.count
    started_at = _started_at(state)
    # Planned lazily: the items without a row are made as the executor asks for them.
    pending = (plan.item_at(position) for position in log.missing())
    progress = Progress(len(plan), done=resumed, enabled=settings.progress)
    runtime = Runtime(job, host)
    public_options = {
        endpoint_id: {
            k: v
            for k, v in spec.options.items()
            if not any(word in k.lower() for word in ("key", "token", "secret", "password"))
        }
        for endpoint_id, spec in endpoints
    }
    manifest = _run_manifest(run_id, pack, plan, host, runtime, settings, executor_spec, public_options)
    manifest["started_at"] = started_at

    def sink(item: WorkItem, row: dict[str, Any]) -> None:
        log.append(item.ident(), row)
        progress.advance(error=bool(row["errors"]))

    try:
        options = dict(executor_spec.options)
        if isinstance(executor, LocalExecutor):  # it reuses the runtime built for the manifest
            executor.run(job, pending, sink, concurrency=settings.concurrency, options=options, runtime=runtime)
        else:
            executor.run(job, pending, sink, concurrency=settings.concurrency, options=options)
    finally:
        progress.close()
        log.close()
    # What ran the items is done with (its endpoints are closed): let it go before the seal and the validation,
    # the run's two largest passes, so they reuse its memory.
    del runtime, pending
    missing = sum(1 for _ in log.missing())
    if missing:
        first = plan.item_at(next(log.missing()))
        raise UsageError(f"{missing} work items produced no row (first: {first.label()}); run again with --resume")

    manifest["finished_at"] = run_timestamp()
    archive = out / "bundle.zip"
    try:
        if bundle_dir.exists():
            shutil.rmtree(bundle_dir)
        bundle_dir.mkdir(parents=True)
        sealed = _write_rows(log, bundle_dir / ROWS_FILE, MetricContext(plan=plan.to_json(), cases=pack.cases_by_id()),
                             host)  # fmt: skip
        write_json_atomic(bundle_dir / RUN_FILE, manifest)
        del manifest  # the validation reads what was written, as it reads any bundle
        write_json_atomic(bundle_dir / METRICS_FILE, summary_document(sealed.metrics))
        seal_bundle(
            bundle_dir,
            pack={"name": pack.name, "version": pack.version, "digest": pack.claimed_digest},
            row_count=sealed.rows,
        )
        zip_bundle(bundle_dir, archive)
    except OSError as exc:
        raise UsageError(
            f"--out {out}: cannot write the bundle ({exc.strerror or exc}); the rows are kept in {state}: "
            "free the space or fix the permissions, then run again with --resume"
        ) from None
    _return_free_memory()
    report = validate_path(bundle_dir, host.registry, pack=pack.root)
    return RunOutcome(
        bundle_dir,
        archive,
        sealed.rows,
        sealed.error_rows,
        resumed,
        report,
        excluded,
        retried_rows=retried,
        warnings=tuple(health_warnings(sealed.health, settings.max_error_rate)),
        failures=tuple(error_rate_problems(sealed.health, settings.max_error_rate)),
    )


def _return_free_memory() -> None:
    """Give the memory the run has freed back to the system before it validates its bundle.

    The executor and the seal leave the C heap with free blocks between live ones; Python's own allocator
    takes fresh pages for the validation instead of reusing them, so without this the run's peak would be
    the validation's on top of that dead weight. ``malloc_trim`` is glibc's; elsewhere nothing is done.
    """
    import contextlib
    import ctypes
    import gc

    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # AttributeError: not glibc
        ctypes.CDLL(None).malloc_trim(0)


@dataclass(frozen=True)
class _Sealed:
    """What one pass over a run's rows, as they were written into its bundle, gave."""

    rows: int
    error_rows: int
    metrics: list[MetricValue]
    health: list[EndpointHealth]


def _write_rows(log: RowLog, path: Path, context: MetricContext, host: PluginHost) -> _Sealed:
    """Write the bundle's rows in plan order, exactly the bytes the log holds, computing the metrics and the
    endpoints' health as each row goes past (one row in memory at a time); atomically."""
    import tempfile

    summary = SummaryPass(context, host.registry)
    health = HealthTally(host.registry.items("outcomes"))
    rows = error_rows = 0
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb", buffering=1 << 20) as handle:
            for line in log.lines_in_plan_order():
                handle.write(line)
                row = orjson.loads(line)
                summary.add(row)
                health.add(row)
                rows += 1
                error_rows += bool(row["errors"])
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return _Sealed(rows, error_rows, summary.values(), health.result())
