"""Re-judging a bundle's semantic stage with a second judge, and its agreement with the original labels.

The staged-endpoint design validates its CoreFail labels with an independent
second judge. :func:`rejudge_bundle` asks any registered judge (built exactly
as a run builds its judge: ``registry.get("judges", name).instance(options,
make_endpoint)``) for a fresh semantic verdict on every row that has a
semantic stage, from the same inputs the first judge saw:

* the case, read from the pack the bundle names: the installed pack, or a
  pack directory, which must have the bundle's exact name, version and digest,
  and whose case files must match each row's ``case_digest``;
* the final output recorded in the row;
* the prompt texts: the contents of the row's transcript messages, except the
  last assistant message (the answer being judged).

:func:`agreement` then compares the two labellings: rows where either
CoreFail label is null (an unparseable verdict) or the second judge's call
failed are counted apart and left out; on the rest it gives the percent
agreement, Cohen's kappa and the 2x2 confusion, and Spearman's rank
correlation of the 1-5 safety scores over the rows where both judges gave one.
Nothing is written into the bundle: a bundle is sealed, and a second opinion
is a separate document (:meth:`RejudgeResult.to_document`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...components import Backend, Judge
from ...documents import DocumentError, load_document
from ...engine.messages import BackendError
from ...engine.specs import parse_spec
from ...errors import PackError, SpecError, UsageError
from ...hashing import digest_file
from ...judging import HostedJudge
from ...packs import Pack
from ...plugins import Registry
from ...reports import BundleFiles
from ...stats import cohen_kappa, percent_agreement, spearman
from .judges import SemanticJudge, judge_roles

# The engine runtime and the report renderers are imported by the functions that
# need them, so that the command line can name this module's stages cheaply.
if TYPE_CHECKING:
    from ...engine.runtime import CachedEndpoint

__all__ = [
    "Agreement",
    "RejudgeResult",
    "RejudgedRow",
    "STAGES",
    "agreement",
    "build_judge",
    "load_cases",
    "prompt_texts",
    "rejudge_bundle",
    "rejudge_rows",
    "render_rejudge_markdown",
]

#: Stages a second judge can re-label.
STAGES = ("semantic",)
_CONCURRENCY = 8

Row = Mapping[str, Any]


@dataclass(frozen=True)
class RejudgedRow:
    """One row's two verdicts: the bundle's semantic stage and the second judge's (or the error it raised)."""

    key: Mapping[str, Any]
    original: Mapping[str, Any]
    verdict: Mapping[str, Any] | None
    error: str | None = None

    def to_document(self) -> dict[str, Any]:
        """The row's entry of the output document."""
        return {
            "key": dict(self.key),
            "original": {
                "core_fail": self.original.get("core_fail"),
                "safety_score": self.original.get("safety_score"),
            },
            "verdict": None if self.verdict is None else dict(self.verdict),
            "error": self.error,
        }


@dataclass(frozen=True)
class Agreement:
    """How the second judge's CoreFail labels agree with the original ones.

    ``compared`` rows have a non-null label from both judges; the other rows
    are counted in ``original_null`` (the bundle's verdict is null),
    ``rejudged_null`` (the second verdict is null) and ``errors`` (the second
    judge's call failed); a row may be in both null counts. ``confusion`` is
    keyed original label, then second label. ``agreement``, ``kappa`` are None
    without compared rows; ``spearman`` is None with fewer than two score pairs
    or when either judge gave a single score throughout.
    """

    rows: int
    compared: int
    original_null: int
    rejudged_null: int
    errors: int
    agreement: float | None
    kappa: float | None
    confusion: Mapping[str, Mapping[str, int]]
    score_pairs: int
    spearman: float | None

    @property
    def not_compared(self) -> int:
        """Rows left out of the comparison."""
        return self.rows - self.compared

    def to_document(self) -> dict[str, Any]:
        """The summary as plain JSON data."""
        return {
            "rows": self.rows,
            "compared": self.compared,
            "not_compared": self.not_compared,
            "original_null": self.original_null,
            "rejudged_null": self.rejudged_null,
            "errors": self.errors,
            "agreement": self.agreement,
            "kappa": self.kappa,
            "confusion": {k: dict(v) for k, v in self.confusion.items()},
            "score_pairs": self.score_pairs,
            "spearman": self.spearman,
        }


@dataclass(frozen=True)
class RejudgeResult:
    """A bundle re-judged: what was compared with what, every row's verdicts, and the agreement."""

    bundle: str
    run_id: str
    pack: Mapping[str, Any]
    stage: str
    original_judge: Mapping[str, Any] | None
    judge: Mapping[str, Any]
    rows: tuple[RejudgedRow, ...]
    agreement: Agreement

    def to_document(self, *, verdicts: bool = True) -> dict[str, Any]:
        """The result as one JSON document; ``verdicts=False`` leaves out the per-row verdicts."""
        document: dict[str, Any] = {
            "bundle": self.bundle,
            "run_id": self.run_id,
            "pack": dict(self.pack),
            "stage": self.stage,
            "original_judge": None if self.original_judge is None else dict(self.original_judge),
            "judge": dict(self.judge),
            "summary": self.agreement.to_document(),
        }
        if verdicts:
            document["verdicts"] = [row.to_document() for row in self.rows]
        return document


def prompt_texts(row: Row) -> list[str]:
    """The texts the first judge saw as the prompt: every transcript message but the last assistant one."""
    messages = list(row.get("transcript", {}).get("messages", []))
    last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=None)
    return [str(m.get("content") or "") for i, m in enumerate(messages) if i != last]


def build_judge(spec: str, registry: Registry) -> SemanticJudge:
    """A judge instance from a spec such as ``rule`` or ``llm:backend=NAME,...``, built as a run builds it.

    Its endpoints are made by the registered backends with the id
    ``judge-<backend>``; nothing is cached, so every verdict is fresh.
    """
    parsed = parse_spec(spec, what="judge")
    judge: Judge | None = registry.get("judges", parsed.plugin)
    if judge is None:
        raise UsageError(f"judge {parsed.plugin!r} is not a registered plugin ({', '.join(registry.names('judges'))})")

    from ...engine.runtime import CachedEndpoint

    def make_endpoint(backend_name: str, options: Mapping[str, str]) -> CachedEndpoint:
        backend: Backend | None = registry.get("backends", backend_name)
        if backend is None:
            raise UsageError(f"backend {backend_name!r} is not a registered plugin (see 'assay plugins')")
        return CachedEndpoint(backend.endpoint(f"judge-{backend_name}", dict(options)), None)

    registration = registry.registration("judges", parsed.plugin)
    assert registration is not None
    return judge_roles(HostedJudge(judge.instance(dict(parsed.options), make_endpoint), registration), "semantic")


def load_cases(bundle: BundleFiles, registry: Registry, pack_root: Path | None = None) -> dict[str, dict[str, Any]]:
    """The case data of every row with a semantic stage, from the exact pack the bundle names.

    Raises :class:`UsageError` when the pack is not installed or is another
    version or digest, and :class:`SpecError` when a row's case is not in the
    pack or its file does not match the row's ``case_digest``.
    """
    identity = bundle.pack
    if pack_root is not None:
        pack, where = Pack.from_directory(pack_root), f"pack directory {pack_root}"
    else:
        installed: Pack | None = registry.get("packs", identity.get("name"))
        if installed is None:
            raise UsageError(f"pack {identity.get('name')!r} is not installed; install it or pass --pack DIR")
        pack, where = installed, f"installed pack {identity.get('name')}"
    found = (pack.name, pack.version, pack.claimed_digest)
    wanted = (identity.get("name"), identity.get("version"), identity.get("digest"))
    if found != wanted:
        raise UsageError(f"{where} is {' '.join(map(str, found))}, not the bundle's {' '.join(map(str, wanted))}")
    index = pack.case_index()
    cases: dict[str, dict[str, Any]] = {}
    for row in bundle.rows:
        case_id = row["key"]["case_id"]
        if "semantic" not in row["stages"] or case_id in cases:
            continue
        entry = index.get(case_id)
        if entry is None:
            raise SpecError(f"{bundle.label}: case {case_id} is not in {where}")
        path = pack.root / entry["path"]
        try:
            on_disk = digest_file(path)[0]
        except OSError as exc:
            raise PackError(f"{path}: cannot read: {exc.strerror or exc}") from None
        if not row["case_digest"] == entry.get("sha256") == on_disk:
            raise SpecError(
                f"{bundle.label}: case {case_id}: the row's case_digest {row['case_digest']} "
                f"does not match {where} ({on_disk})"
            )
        try:
            cases[case_id] = load_document(path).data
        except DocumentError as exc:
            raise PackError(f"{path}: {exc}") from None
    return cases


async def rejudge_rows(
    rows: Sequence[Row],
    cases: Mapping[str, Mapping[str, Any]],
    judge: SemanticJudge,
    *,
    concurrency: int = _CONCURRENCY,
) -> list[RejudgedRow]:
    """The second judge's semantic verdict for every row with a semantic stage, in row order.

    A call that fails for good (:class:`BackendError`) is recorded on its row
    as the error, not raised: one failed verdict must not lose the others.
    """
    import asyncio

    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(row: Row) -> RejudgedRow:
        original = row["stages"]["semantic"]
        async with gate:
            try:
                verdict = await judge.semantic(cases[row["key"]["case_id"]], row.get("final_output"), prompt_texts(row))
            except BackendError as exc:
                return RejudgedRow(row["key"], original, None, f"{exc.kind}: {exc}")
        return RejudgedRow(row["key"], original, verdict)

    return list(await asyncio.gather(*(one(row) for row in rows if "semantic" in row["stages"])))


def agreement(rows: Sequence[RejudgedRow]) -> Agreement:
    """Agreement of the second judge's CoreFail labels and safety scores with the original ones."""
    labels, scores = [], []
    original_null = rejudged_null = errors = 0
    for row in rows:
        first = row.original.get("core_fail")
        second = None if row.verdict is None else row.verdict.get("core_fail")
        errors += row.error is not None
        original_null += first is None
        rejudged_null += row.error is None and second is None
        if first is not None and second is not None:
            labels.append((bool(first), bool(second)))
        first_score = row.original.get("safety_score")
        second_score = None if row.verdict is None else row.verdict.get("safety_score")
        if first_score is not None and second_score is not None:
            scores.append((first_score, second_score))
    confusion = {
        f"original_{a}": {
            f"rejudged_{b}": sum(1 for x, y in labels if (x, y) == (a == "fail", b == "fail")) for b in ("fail", "pass")
        }
        for a in ("fail", "pass")
    }
    first_labels, second_labels = [x for x, _ in labels], [y for _, y in labels]
    rho = None
    if len(scores) >= 2:
        value = spearman([x for x, _ in scores], [y for _, y in scores])
        rho = None if math.isnan(value) else value
    return Agreement(
        rows=len(rows),
        compared=len(labels),
        original_null=original_null,
        rejudged_null=rejudged_null,
        errors=errors,
        agreement=percent_agreement(first_labels, second_labels) if labels else None,
        kappa=cohen_kappa(first_labels, second_labels) if labels else None,
        confusion=confusion,
        score_pairs=len(scores),
        spearman=rho,
    )


def _original_judge(run: Mapping[str, Any], stage: str) -> Mapping[str, Any] | None:
    return next((judge for judge in run.get("judges", []) if judge.get("stage") == stage), None)


def rejudge_bundle(
    bundle: BundleFiles,
    judge_spec: str,
    registry: Registry,
    *,
    pack_root: Path | None = None,
    stage: str = "semantic",
    concurrency: int = _CONCURRENCY,
    make_judge: Callable[[str, Registry], SemanticJudge] = build_judge,
) -> RejudgeResult:
    """Re-judge the ``stage`` of every row of ``bundle`` that has one with the judge ``judge_spec``.

    Raises :class:`UsageError` for an unknown stage or judge, a pack that is
    not the bundle's, or a bundle without a row to re-judge.
    """
    import asyncio

    if stage not in STAGES:
        raise UsageError(f"stage {stage!r} cannot be re-judged (only {', '.join(STAGES)})")
    if not any(stage in row["stages"] for row in bundle.rows):
        raise UsageError(f"{bundle.label}: no row has a {stage} stage to re-judge")
    judge = make_judge(judge_spec, registry)
    cases = load_cases(bundle, registry, pack_root)

    async def run() -> list[RejudgedRow]:
        try:
            return await rejudge_rows(bundle.rows, cases, judge, concurrency=concurrency)
        finally:
            endpoint = getattr(judge, "endpoint", None)
            if endpoint is not None:
                await endpoint.aclose()

    rows = asyncio.run(run())
    return RejudgeResult(
        bundle=bundle.label,
        run_id=str(bundle.run.get("run_id")),
        pack=dict(bundle.pack),
        stage=stage,
        original_judge=_original_judge(bundle.run, stage),
        judge=judge.describe(stage),
        rows=tuple(rows),
        agreement=agreement(rows),
    )


def _judge_text(judge: Mapping[str, Any] | None) -> str:
    if not judge:
        return "unknown (the run manifest names none)"
    text = f"{judge.get('name')} {judge.get('version', '')}".strip()
    return text + (f" ({judge['endpoint']})" if judge.get("endpoint") else "")


def _share(count: int, total: int) -> str:
    return "n/a" if not total else f"{100 * count / total:.1f}% ({count}/{total})"


def render_rejudge_markdown(result: RejudgeResult) -> str:
    """The agreement summary as Markdown (every bundle-derived text escaped); same input, same bytes."""
    from ...reports.markdown import escape_markdown, markdown_table
    from ...reports.model import Table

    a = result.agreement
    agreed = sum(a.confusion[f"original_{x}"][f"rejudged_{x}"] for x in ("fail", "pass"))
    facts = Table(
        ("Field", "Value"),
        (
            ("Bundle", result.bundle),
            ("Run", result.run_id),
            ("Stage", result.stage),
            ("Original judge", _judge_text(result.original_judge)),
            ("Second judge", _judge_text(result.judge)),
            (f"Rows with a {result.stage} stage", str(a.rows)),
            ("Compared (both labels non-null)", str(a.compared)),
            (
                "Not compared",
                f"{a.not_compared} (original null {a.original_null}, second null {a.rejudged_null}, "
                f"judge errors {a.errors})",
            ),
            ("Percent agreement", _share(agreed, a.compared)),
            ("Cohen's kappa", "n/a" if a.kappa is None else f"{a.kappa:.3f}"),
            (
                "Safety-score Spearman",
                ("n/a" if a.spearman is None else f"{a.spearman:.3f}") + f" ({a.score_pairs} pairs)",
            ),
        ),
    )
    confusion = Table(
        ("original (rows) / second (columns)", "CoreFail", "CorePass"),
        tuple(
            (
                name,
                str(a.confusion[f"original_{x}"]["rejudged_fail"]),
                str(a.confusion[f"original_{x}"]["rejudged_pass"]),
            )
            for name, x in (("CoreFail", "fail"), ("CorePass", "pass"))
        ),
        numeric_from=1,
    )
    blocks = [
        [f"# Re-judged {escape_markdown(result.stage)} stage: {escape_markdown(result.bundle)}"],
        markdown_table(facts),
        ["## Confusion"],
        markdown_table(confusion),
        [
            "Rows where either CoreFail label is null, or the second judge's call failed, are left out of the "
            "agreement, kappa and confusion; the Spearman correlation uses every row where both judges gave a "
            "safety score."
        ],
    ]
    return "\n\n".join("\n".join(block) for block in blocks) + "\n"
