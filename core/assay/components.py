"""The component types plugins register, one per hook.

Concrete, data-like components (families, defenses, metric values) are frozen
dataclasses. Behavioural extension points are :class:`typing.Protocol`
classes: a plugin satisfies them by shape and never inherits from assay.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

if TYPE_CHECKING:
    # Only for annotations: the engine imports this module, not the other way round.
    from .engine.messages import ChatRequest, ChatResponse
    from .engine.planner import WorkItem
    from .engine.runtime import Job

__all__ = [
    "Analysis",
    "AnalysisContext",
    "Backend",
    "CaseKind",
    "Channel",
    "Defense",
    "Endpoint",
    "Executor",
    "FIRST_ENDPOINT",
    "Family",
    "Judge",
    "JudgeInstance",
    "Metric",
    "MetricAccumulator",
    "MetricContext",
    "MetricValue",
    "OWN_ENDPOINT",
    "Oracle",
    "OracleResult",
    "Outcome",
    "PackCheck",
    "PackCheckResult",
    "ReportSection",
    "RowProblem",
    "RunCheck",
    "RunOption",
    "Sandbox",
    "SandboxInstance",
    "Stage",
    "Tool",
]

_T = TypeVar("_T")
_OPTION_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
#: The settings of ``assay run`` itself (its options and run-file keys): no stage option may take one of these names.
RUN_SETTINGS = frozenset(
    {
        "concurrency", "context_window", "defenses", "endpoints", "epochs", "executor", "help", "judge", "limit",
        "max_error_rate", "max_model_calls", "max_tokens", "no_preflight", "out", "pack", "quiet", "resume",
        "retry_errors", "run_file", "sample", "sample_seed", "sandbox", "save_path", "seeds", "stages",
        "temperature", "wall_time",
    }
)  # fmt: skip
_State = TypeVar("_State")  # a sandbox's own snapshot type (see SandboxInstance)


@dataclass(frozen=True)
class Family:
    """An attack family or task kind that cases name in ``family``.

    ``kind`` is the registered case kind the family belongs to. ``channels``
    are the injected channels the family's attacks arrive through (the first
    is the default); ``default_labels`` fill a case's multi-label metadata
    where it is silent. ``scripted_rate`` (optional) is the share of the
    family's cases the ``scripted:mixed`` reference agent complies with.
    ``conditions`` (optional) are the conditions a run of the family's cases
    uses when it names none: a run whose cases all belong to families that
    name some runs the union of those, in the order given, instead of the
    registered defaults (a benchmark whose attack is itself a condition
    names its headline attack here).
    """

    name: str
    kind: str
    title: str
    description: str
    channels: tuple[str, ...] = ()
    default_labels: Mapping[str, Any] = field(default_factory=dict)
    stages: tuple[str, ...] = ()
    scripted_rate: float | None = None
    conditions: tuple[str, ...] = ()


@dataclass(frozen=True)
class CaseKind:
    """A kind of case (``attack``, ``trajectory``, ...): what a case's ``kind`` and a family's ``kind`` name."""

    name: str
    description: str


@dataclass(frozen=True)
class Channel:
    """An injection channel (``user_turn``, ``tool_return``, ...): how a case's injected content reaches the agent."""

    name: str
    description: str


@dataclass(frozen=True)
class Stage:
    """A kind of evaluation: what the engine does to one work item, recorded in its row under ``stages[name]``.

    ``run`` is a coroutine function taking the item's
    :class:`~assay.engine.stages.context.StageContext` (public as
    ``assay.api.StageContext``): it reads the case, the endpoint, the judge
    and what earlier stages left in ``context.row``, and sets
    ``context.row["stages"][name]`` to an outcome that satisfies
    ``outcome_schema`` (a JSON Schema; the spec's own definition for the
    built-in stages). A :class:`~assay.errors.BackendError` it lets out ends
    the item's stages with an error row (an outcome the stage set before it
    raised stays: the built-in stages score what the agent already did when a
    later model call fails); any other exception is recorded as the stage's
    failure, and an outcome its schema refuses is dropped and recorded.

    ``kinds`` are the case kinds the stage runs on; a family may list the
    stage only if its kind is one of them. ``needs`` are stages whose
    outcome it reads: planning the stage without them is refused, and they
    run first. ``check_row`` (optional) is what the validator checks of a
    row beyond the schema for this stage (see :class:`RowProblem`);
    ``check_case(case, pack_root)`` (optional) is what the validator checks
    of a case the stage runs beyond the schema, as :class:`RowProblem` s with
    the case's JSON pointers (what the stage could not lay down safely:
    ``assay validate`` and ``assay run`` then refuse the pack);
    ``rederiver`` (optional) makes what re-derives its recorded verdicts from
    the rest of a row, so that the validator refuses a relabelled one (see
    :mod:`assay.rederive`); ``replayer`` (optional) makes what replays a
    row's recorded actions for ``assay validate --replay``. The engine runs
    a case's stages in one fixed order: the spec's stages in the spec's
    order, then the others by name, each after what it needs.

    Conditions: ``applies`` lists the placements of a condition the stage
    applies to the prompts it sends (a stage placing a defense's text with
    :func:`assay.api.apply_condition` lists the five prompt placements). The
    engine refuses a run whose condition places text no planned stage
    applies, records a digest of every prompt a stage sends, and makes a row
    an error row (``condition_not_applied``) when a stage that applies the
    condition's placement sent a prompt without its text.

    What a run gives the stage: ``uses`` names the run's components it reads
    (``judge``: the run's ``--judge``, recorded per stage in the run
    manifest's ``judges``; ``sandbox``: the run's ``--sandbox``, checked
    before the run starts); ``options`` are the :class:`RunOption` s it adds
    to ``assay run`` (their values reach it as ``context.options``);
    ``prompts()`` (optional) lists the versioned prompts it sends, recorded
    in the manifest's ``prompts``; ``scripted(agent, request)`` (optional)
    is how the ``scripted`` backend's reference agents answer the stage's
    requests (see :mod:`assay.backends.scripted`); ``check_pack(check)``
    (optional) is what ``assay pack check`` runs for the stage (it gets a
    :class:`PackCheck` and returns a :class:`PackCheckResult`); ``preflight(check)`` (optional) refuses,
    with a :class:`~assay.errors.AssayError` in one line, a run this host or
    these settings cannot carry out, before anything runs (it gets a
    :class:`RunCheck`).
    """

    name: str
    description: str
    kinds: tuple[str, ...]
    outcome_schema: Mapping[str, Any] = field(repr=False)
    run: Callable[[Any], Awaitable[None]] = field(repr=False)
    needs: tuple[str, ...] = ()
    check_row: Callable[[Mapping[str, Any], frozenset[str]], Iterable[RowProblem]] | None = field(
        default=None, repr=False
    )
    rederiver: Callable[[Any], Any] | None = field(default=None, repr=False)
    replayer: Callable[[Any], Any] | None = field(default=None, repr=False)
    uses: frozenset[str] = frozenset()
    #: The placements of a condition this stage applies to what it sends (``system_prefix``, ``system_suffix``,
    #: ``sandwich``, ``user_prefix``, ``user_suffix``, or its plugin's own extension placement); see
    #: :func:`assay.api.apply_condition`.
    applies: tuple[str, ...] = ()
    options: tuple[RunOption, ...] = ()
    prompts: Callable[[], Sequence[Mapping[str, Any]]] | None = field(default=None, repr=False)
    preflight: Callable[[RunCheck], None] | None = field(default=None, repr=False)
    scripted: Callable[[Any, Any], Any] | None = field(default=None, repr=False)
    check_pack: Callable[[PackCheck], PackCheckResult] | None = field(default=None, repr=False)
    check_case: Callable[[Mapping[str, Any], Path], Iterable[RowProblem]] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        unknown = sorted(set(self.uses) - {"judge", "sandbox"})
        if unknown:
            raise ValueError(f"stage {self.name!r}: uses {unknown[0]!r}, expected 'judge' or 'sandbox'")


#: An endpoint run option's value meaning the run's first ``--endpoint`` (see :class:`RunOption`).
FIRST_ENDPOINT = "first"
#: An endpoint run option's value meaning no fixed endpoint: each item's own (see :class:`RunOption`).
OWN_ENDPOINT = "self"


@dataclass(frozen=True)
class RunOption:
    """An option a stage adds to ``assay run`` (``--<name>`` with ``_`` as ``-``, and ``<name>`` in a run file).

    ``default`` is its value when not given (None: unset); ``choices``
    limits the values; an ``endpoint`` option's value is a backend spec
    (``scripted:comply``, ``openai:...``) that the run builds into an
    endpoint, cached like the others, which the stage finds in
    ``context.options[name]``; two values of an endpoint option are not
    specs: :data:`FIRST_ENDPOINT` (``first``) is the run's first
    ``--endpoint``, one fixed agent for every item, and :data:`OWN_ENDPOINT`
    (``self``) leaves the option unset, so each item's own endpoint acts. A ``recorded`` option's value is written to
    the run manifest's ``stage_options`` under its name when a stage that has
    it is planned (an endpoint by its description, when one is given); a
    ``spec_member`` option, one the spec gives a manifest member of its own
    (spec 1.0's ``controller`` and ``exec_agent``), is written there.
    Names are lower-case words joined by ``_`` (at most 64 characters). A
    ``judge`` option's value is a judge spec (``rule``, ``llm:backend=...``)
    that the run builds like ``--judge``: the stage finds the instance in
    ``context.options[name]``, and the run manifest's ``judges`` entry for
    the stage names that judge instead of the run's.
    """

    name: str
    help: str
    default: str | None = None
    choices: tuple[str, ...] | None = None
    endpoint: bool = False
    recorded: bool = True
    spec_member: bool = False
    judge: bool = False

    def __post_init__(self) -> None:
        if not _OPTION_NAME.fullmatch(self.name):
            raise ValueError(f"run option {self.name!r}: expected lower-case words joined by '_' (at most 64)")
        if self.name in RUN_SETTINGS:
            raise ValueError(f"run option {self.name!r}: the name of one of assay run's own settings")


@dataclass(frozen=True)
class PackCheck:
    """What a stage's ``check_pack`` gets: the pack, the plugin host (to build a run's runtime), the sandbox spec,
    how many cases may be in flight, and the display of a long check: ``progress.grow(n)`` when the stage knows
    it has ``n`` items to do, ``progress.advance()`` as each ends (None: nothing to show)."""

    pack: Any
    host: Any
    sandbox: str = "local"
    concurrency: int = 8
    progress: Any = None


@dataclass(frozen=True)
class PackCheckResult:
    """What a stage's ``check_pack`` found: the cases it checked, counts to print (``{"attack cases": 4}``), and
    one line per failure, naming the case and what disagreed."""

    checked: frozenset[str]
    counts: Mapping[str, int]
    failures: Sequence[str]


@dataclass(frozen=True)
class RunCheck:
    """What a stage's ``preflight`` sees: the run's option values (each stage option's name to its value, None
    when unset), its conditions and the plugin registry."""

    options: Mapping[str, str | None]
    conditions: Sequence[str]
    registry: Any


@dataclass(frozen=True)
class RowProblem:
    """What a stage's ``check_row`` finds wrong with a schema-valid result row, beyond what its schema says.

    ``check_row(row, planned_stages)`` is called by the validator on every
    row of a run that plans the stage (the row may lack the stage's outcome:
    that can be the problem). ``kind`` ranks the finding: ``reference`` (the
    outcome contradicts another of the row), ``completeness`` (something the
    plan promises is missing) or ``integrity``.
    """

    pointer: str
    message: str
    code: str
    kind: str = "reference"


@dataclass(frozen=True)
class Tool:
    """A tool an agent in a sandbox can call: its name, what it does, the JSON Schema of its arguments, and the
    sandboxes that implement it.

    ``name`` is what the model calls (OpenAI function names: letters, digits,
    ``_`` and ``-``, at most 64). A sandbox offers the agent the tools it
    implements (its instance's ``tools()``); registering them makes them
    known to the validator, which warns when a case's oracle waits for a call
    to a tool no registered tool is named like (it could never fire).
    """

    name: str
    description: str
    parameters: Mapping[str, Any] = field(repr=False)
    sandboxes: tuple[str, ...]

    def schema(self) -> dict[str, Any]:
        """The OpenAI-format tool schema offered to a model."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": dict(self.parameters)},
        }


@dataclass(frozen=True)
class ReportSection:
    """One of the main tables of ``assay report``: built from a bundle's recomputed metric values.

    ``build(panel)`` gets an :class:`assay.api.ReportPanel` and returns an
    :class:`assay.api.MainSection`, several, or None where the bundle has
    nothing for it (its stage did not run, say). Sections are shown in
    ``order``, then by name; the built-in ones take 10 to 60.
    """

    name: str
    description: str
    build: Callable[[Any], Any] = field(repr=False)
    order: int = 100


@dataclass(frozen=True)
class AnalysisContext:
    """What an analysis of ``assay compare`` may read besides the rows: the bundle's run manifest, each case's
    document by id (``cases``; each case's ``family`` among its members), the invocation's seed, resamples and
    significance level ``alpha``."""

    run: Mapping[str, Any]
    cases: Mapping[str, Mapping[str, Any]]
    seed: int
    resamples: int
    alpha: float


@dataclass(frozen=True)
class Analysis:
    """A paired analysis ``assay compare`` adds to its per-outcome tests where a bundle's rows call for it.

    ``applies(rows)`` says whether it has anything to say about these rows;
    ``run(rows, a, bs, context)`` gets the rows, the A selector and the B
    selectors (:class:`assay.api.Selector`) and an :class:`AnalysisContext`,
    and returns a list of results. ``document(results)`` makes them
    JSON-ready (``assay compare --json`` puts that under the analysis's
    name) and ``markdown(results, context)`` prints them.
    """

    name: str
    description: str
    applies: Callable[[Sequence[Mapping[str, Any]]], bool] = field(repr=False)
    run: Callable[..., Sequence[Any]] = field(repr=False)
    document: Callable[[Sequence[Any]], Any] = field(repr=False)
    markdown: Callable[[Sequence[Any], AnalysisContext], str] = field(repr=False)


@dataclass(frozen=True)
class Defense:
    """A condition (a prompt-level defense, a framing, a baseline); ``document`` is its policy document.

    A ``default`` condition is what a run uses when it names none (every
    registered default, by name).
    """

    name: str
    document: Mapping[str, Any]
    default: bool = False

    @property
    def placement(self) -> str:
        """Where the policy text goes: none, system_prefix, system_suffix or sandwich."""
        return str(self.document["placement"])


@dataclass(frozen=True)
class Outcome:
    """An outcome of a result row that ``assay compare`` pairs rows on.

    A ``binary`` outcome's ``of(row)`` gives True or False; a ``score``
    outcome's gives a number (compared by its mean, with a task-blocked
    sign-permutation test). Either gives None where the outcome does not
    apply to the row (its stage is absent, say); such rows are not paired.
    ``kinds`` (optional) are the case kinds it is over, as for the metric of
    the same outcome (an attack outcome leaves the benign companions out).
    A ``utility`` outcome says the task got done (benign utility, success):
    a run, its report and the validator warn when it is near zero for an
    endpoint under a condition, since a model that answers nothing useful
    otherwise looks safe (see :mod:`assay.health`).
    """

    name: str
    description: str
    of: Callable[[Mapping[str, Any]], Any] = field(repr=False)
    scale: str = "binary"
    kinds: tuple[str, ...] = ()
    utility: bool = False

    def __post_init__(self) -> None:
        if self.scale not in ("binary", "score"):
            raise ValueError(f"outcome {self.name!r}: scale must be 'binary' or 'score', not {self.scale!r}")


@dataclass(frozen=True)
class OracleResult:
    """What an oracle decided for one work item."""

    fired: bool
    detail: str = ""


@runtime_checkable
class Oracle(Protocol):
    """A deterministic scorer named by cases.

    ``decides`` lists the outcomes the oracle may decide (e.g.
    ``observed_harm``, ``text_harm``, ``success``); ``params_schema`` is a
    JSON Schema the validator applies to the parameters a case gives it.
    """

    @property
    def name(self) -> str:
        """The oracle's registered name, as cases give it (``oracles[].plugin``, ``checker.plugin``)."""
        ...

    @property
    def description(self) -> str:
        """One line for ``assay plugins``."""
        ...

    @property
    def decides(self) -> frozenset[str]:
        """The outcomes the oracle may decide; a case asking it for another is invalid."""
        ...

    @property
    def params_schema(self) -> Mapping[str, Any]:
        """The JSON Schema the validator applies to the ``params`` a case gives the oracle."""
        ...

    def evaluate(self, observation: Mapping[str, Any], params: Mapping[str, Any]) -> OracleResult:
        """Decide one work item from its observation (final output, transcript, state diff, case)."""
        ...

    # An oracle that waits for calls to tools may also have ``tool_names(params)``: the (JSON pointer within
    # params, name glob) pairs it matches tool calls with. The validator warns on a glob no registered tool's
    # name matches. (Not a protocol member: an oracle without it is still an Oracle.)


@dataclass(frozen=True)
class MetricValue:
    """One number of a metrics summary: a metric over one group of rows."""

    metric: str
    group: Mapping[str, Any]
    value: float | None
    numerator: int | None = None
    denominator: int | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    detail: Mapping[str, Any] | None = None

    def to_document(self) -> dict[str, Any]:
        """The metrics-summary entry for this value, omitting absent fields."""
        doc: dict[str, Any] = {"metric": self.metric, "group": dict(self.group), "value": self.value}
        for name in ("numerator", "denominator", "ci_low", "ci_high", "detail"):
            value = getattr(self, name)
            if value is not None:
                doc[name] = dict(value) if name == "detail" else value
        return doc


@dataclass(frozen=True)
class MetricContext:
    """What a metric may use besides the rows: the run's plan and the pack's cases.

    ``cases`` maps each case id to its case document (for a run's own pack,
    :meth:`assay.packs.Pack.cases_by_id`: read lazily, the family straight
    from the manifest); it is empty when the pack is not at hand.
    ``family_kinds`` maps each registered family to its case kind (filled by
    :func:`assay.summary.compute_metrics` from the registry), so a metric
    over one kind of case (attacks, not their benign companions) tells them
    apart without reading the case files.

    ``memo`` lets metrics share work (such as grouping the rows) within one
    computation of a summary; a context is made per summary, so nothing leaks
    between runs.
    """

    plan: Mapping[str, Any]
    cases: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    family_kinds: Mapping[str, str] = field(default_factory=dict)
    _memo: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)

    def memo(self, key: Hashable, compute: Callable[[], _T]) -> _T:
        """The value cached under ``key``, computing it on first use."""
        if key not in self._memo:
            self._memo[key] = compute()
        value: _T = self._memo[key]
        return value


@runtime_checkable
class MetricAccumulator(Protocol):
    """A metric's state while the rows of one summary go past it, one at a time (see ``Metric.accumulate``).

    Its memory must not grow with the rows: counts per group, or a few bytes
    per work item for paired tests, never the rows themselves.
    """

    def add(self, row: Mapping[str, Any]) -> None:
        """Take one row into account (the row is not kept: copy what is needed of it)."""
        ...

    def values(self) -> list[MetricValue]:
        """Every value of the metric over the rows added, as ``Metric.compute`` would give them."""
        ...


@runtime_checkable
class Metric(Protocol):
    """A metric computed from result rows, per group (endpoint x condition by default).

    A metric may also have a ``reads`` attribute: the top-level row members
    its ``compute`` reads, as a frozenset of names (the built-in metrics read
    ``{"key", "stages"}``). When every registered metric says, a validation
    of a large bundle holds only those members of each row, not the
    transcripts; without it a metric is given the whole rows. A member read
    but not declared is missing from the rows it is given.

    A metric may also have ``accumulate(context)``, returning a
    :class:`MetricAccumulator`: the engine, the validator and the reports
    then stream every row past it once and never hold the rows, so their
    memory stays flat however large the run. Its values must equal
    ``compute``'s over the same rows (the built-in metrics compute by
    accumulating). A metric without it is given the rows, held in memory.
    """

    @property
    def name(self) -> str:
        """The metric's registered name, as metrics summaries give it (``metrics[].metric``)."""
        ...

    @property
    def description(self) -> str:
        """One line for ``assay plugins``."""
        ...

    @property
    def stage(self) -> str:
        """The stage whose outcomes the metric reads."""
        ...

    def compute(self, rows: Sequence[Mapping[str, Any]], context: MetricContext) -> list[MetricValue]:
        """Compute every value of this metric over the rows."""
        ...


@runtime_checkable
class Endpoint(Protocol):
    """One model endpoint of a run, as a :class:`Backend` makes it.

    The engine wraps every endpoint in its response cache and calls it from
    one asyncio event loop, possibly with many requests in flight. An
    endpoint may also have a ``model`` attribute (a string or None): when
    present it is part of the response-cache key.
    """

    @property
    def id(self) -> str:
        """The endpoint id the run gave it (``--endpoint ...,id=NAME``); rows name their endpoint by it."""
        ...

    @property
    def scripted(self) -> bool:
        """True for a deterministic reference agent: its rows are marked scripted and never cached."""
        ...

    def describe(self) -> dict[str, Any]:
        """The endpoint's entry in the run manifest's ``endpoints``, called once when the manifest is written.

        The run manifest schema requires ``id``, ``backend`` and ``model``
        (with at least ``name``) and allows ``scripted``, ``base_url``,
        ``generation`` and ``concurrency``; the engine adds ``options``.
        """
        ...

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """Answer one chat request, called for every model call of a stage or a judge.

        Transient failures are retried inside; once the retry budget is spent
        it raises :class:`~assay.errors.BackendError`, which turns
        the work item into an error row.
        """
        ...

    async def aclose(self) -> None:
        """Release connections; called when the run is done, and by the Ray executor after every batch.

        A Ray worker reuses its endpoints for the next batch on a new event
        loop, so a :meth:`complete` after ``aclose`` must work (reopening
        what it needs).
        """
        ...


@runtime_checkable
class Backend(Protocol):
    """A model backend: makes endpoints from ``--endpoint NAME:key=value,...`` options."""

    @property
    def name(self) -> str:
        """The backend's registered name, the ``NAME`` of ``--endpoint NAME:...``."""
        ...

    @property
    def description(self) -> str:
        """One line for ``assay plugins``."""
        ...

    def endpoint(self, endpoint_id: str, options: Mapping[str, str]) -> Endpoint:
        """Make one endpoint, when a run (or a judge, or ``assay rejudge``) is set up.

        ``options`` are the ``key=value`` pairs of the endpoint spec, without
        the ones the engine reads itself (``family``); options the backend
        cannot use raise :class:`~assay.errors.UsageError`.
        """
        ...


@runtime_checkable
class JudgeInstance(Protocol):
    """A judge configured for one run, as :meth:`Judge.instance` returns it.

    What it labels is the judging stages' to say: each calls the roles it
    needs (the staged-endpoint design's stages call ``semantic`` and
    ``audit_fallback``) and refuses in one line a judge without them. A judge that calls a model
    may keep that endpoint in an ``endpoint`` attribute: the engine then
    closes it (``await endpoint.aclose()``) when the run ends.
    """

    def describe(self, stage: str) -> dict[str, Any]:
        """The run manifest's ``judges`` entry for one judged stage.

        Called once per judged stage when the run manifest is written, and by
        ``assay rejudge`` for the second judge. The run manifest schema
        requires ``name`` and ``stage`` and allows only ``version``,
        ``prompt_sha256``, ``endpoint`` and ``max_reasks`` besides.
        """
        ...

    def producer(self) -> dict[str, Any]:
        """The ``produced_by`` of the outcomes this judge labels (``kind`` ``judge``, ``name``, ``version``)."""
        ...


@runtime_checkable
class Judge(Protocol):
    """A judge that labels stage outcomes from a transcript.

    Its identity is declared on the class, so that a validator knows it
    without configuring one: ``version``, ``prompt_template`` (the text it
    asks a model with, or for a judge that asks none the rules or weights it
    applies) and ``prompt_sha256``, the digest of that template
    (:func:`assay.judging.template_digest`), checked when it is registered.
    The host, not the judge, records who judged: see :mod:`assay.judging`.
    """

    @property
    def name(self) -> str:
        """The judge's registered name, as ``--judge NAME`` and run manifests give it."""
        ...

    @property
    def version(self) -> str:
        """The judge's version: it changes whenever a verdict could change."""
        ...

    @property
    def prompt_template(self) -> str:
        """What the judge asks a model with (or, for a judge that asks none, the rules or weights it applies)."""
        ...

    @property
    def prompt_sha256(self) -> str:
        """``sha256:<hex>`` of :attr:`prompt_template`; the host refuses a judge whose digest is not its template's."""
        ...

    @property
    def description(self) -> str:
        """One line for ``assay plugins``."""
        ...

    def instance(
        self, options: Mapping[str, str], make_endpoint: Callable[[str, Mapping[str, str]], Endpoint]
    ) -> JudgeInstance:
        """Configure the judge for one run, called once when the run (or ``assay rejudge``) is set up.

        ``options`` are the ``key=value`` pairs of ``--judge NAME:...``;
        ``make_endpoint(backend, options)`` builds an endpoint of a registered
        backend (cached like the run's own) for a judge that calls a model.
        """
        ...


@runtime_checkable
class SandboxInstance(Protocol[_State]):
    """The fresh stores of one work item, as :meth:`Sandbox.create` returns them.

    ``_State`` is the sandbox's own snapshot type: the engine only hands
    snapshots back to :meth:`diff`.
    """

    def tools(self) -> Sequence[Mapping[str, Any]]:
        """The tools the agent is offered, as OpenAI tool schemas; called once per work item."""
        ...

    async def call(self, name: str, arguments: object) -> str:
        """Run one tool call of the agent and return its result text.

        ``arguments`` are what the model sent (normally a JSON object, but
        possibly anything). A bad call is answered with an error text, not an
        exception: the agent sees it and the work item goes on.
        """
        ...

    def snapshot(self) -> _State:
        """The state of every store, taken before the agent's first turn and after its last."""
        ...

    def diff(self, before: _State, after: _State) -> list[dict[str, Any]]:
        """The exec stage's state diff between two snapshots: entries with ``store``, ``op`` and ``target``.

        Called once, after the last session; the case's oracles decide on it.
        """
        ...

    def close(self) -> None:
        """Delete the stores; called once per work item, also when the agent loop failed."""
        ...


@runtime_checkable
class Sandbox(Protocol):
    """Isolated stores and a code runner that exec-stage tool calls act on.

    A sandbox may also have a ``check()`` method (no arguments, returns
    None). It is optional: when present, ``assay run`` calls it once before a
    run with the exec stage, and it raises :class:`~assay.errors.UsageError`
    when the machine cannot provide the isolation the sandbox promises.
    """

    @property
    def name(self) -> str:
        """The sandbox's registered name, as ``--sandbox NAME`` and run manifests give it."""
        ...

    @property
    def description(self) -> str:
        """One line for ``assay plugins``."""
        ...

    def create(
        self, case: Mapping[str, Any], *, pack_root: Path, options: Mapping[str, str] | None = None
    ) -> SandboxInstance[Any]:
        """Lay down fresh stores for one work item from the case's ``environment``; called once per exec item.

        ``pack_root`` is the pack's directory (fixtures are read from it);
        ``options`` are the ``key=value`` pairs of ``--sandbox NAME:...``.
        """
        ...


@runtime_checkable
class Executor(Protocol):
    """Runs planned work items (local asyncio, Ray, ...).

    The built-in ``local`` executor's :meth:`run` also takes ``runtime=``, a
    :class:`~assay.engine.runtime.Runtime` the driver already built from the
    job; the engine passes it to that executor only.
    """

    @property
    def name(self) -> str:
        """The executor's registered name, as ``--executor NAME`` gives it."""
        ...

    @property
    def description(self) -> str:
        """One line for ``assay plugins``."""
        ...

    def run(
        self,
        job: Job,
        items: Iterable[WorkItem],
        sink: Callable[[WorkItem, dict[str, Any]], None],
        *,
        concurrency: int = 16,
        options: Mapping[str, str] | None = None,
    ) -> None:
        """Execute the items, called once per run with the work items that have no row yet.

        Each item is executed by a :class:`~assay.engine.runtime.Runtime`
        rebuilt from the (picklable) ``job``; ``sink(item, row)`` must be
        called in the driver's process as each row is finished. ``options``
        are the ``key=value`` pairs of ``--executor NAME:...``. Returns when
        every item is done.

        Stages hand blocking work (file tools, confined children, checkers) to
        the event loop's default executor with :func:`asyncio.to_thread`; an
        executor that keeps N items in flight on a loop calls
        :func:`assay.engine.threads.use_worker_threads` with N once that loop
        runs, so those calls overlap instead of queueing for asyncio's few
        default threads.
        """
        ...
