"""Validating a result bundle: seal, provenance, pack identity, completeness, metrics.

The order of checks follows trust: first that every file is what the seal
says, then that each document fits the spec, then that names resolve, then
that the planned matrix is complete, and last that every claimed number is
reproduced by the metric plugins from the rows.
"""

from __future__ import annotations

import gc
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping, MutableSequence, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import orjson

from ..bundle import BUNDLE_MANIFEST
from ..components import MetricContext, MetricValue
from ..documents import SourceDocument
from ..errors import SpecError
from ..hashing import digest_document, digest_file
from ..health import HealthTally, health_warnings
from ..judging import judge_problems, producer_difference
from ..packs import Pack
from ..plan_matrix import KEY_FIELDS, PlanMatrix
from ..plugins import Registry
from ..schemas import STAGES, SUPPORTED_MAJORS, CompiledSchema, major_of, spec_schemas
from ..signing import SIGNATURE_FILE
from ..summary import MetricFailure, SummaryPass, compare_claims
from ._common import check_schema, get, read_document, safe_child
from ._conditions import ConditionCheck
from ._provenance import check_provenance, used_components
from ._report import Rank, Report
from ._verdict import pack_problems

__all__ = ["validate_bundle"]

_P = ParamSpec("_P")
_R = TypeVar("_R")

#: Findings of one kind listed per file before the rest are summarised.
_MAX_LISTED = 20


def _check_seal(
    root: Path, manifest: dict[str, Any], bundle_doc: SourceDocument, name: Callable[[str], str], report: Report
) -> None:
    listed: set[str] = set()
    repeated: dict[str, int] = {}
    for index, entry in enumerate(get(manifest, "files", default=[]) or []):
        relative = get(entry, "path")
        if not isinstance(relative, str):
            continue
        pointer = f"/files/{index}"
        if relative in listed:
            # Each file is hashed once: a list naming one file thousands of times costs nothing but a finding.
            repeated[relative] = repeated.get(relative, 0) + 1
            if repeated[relative] == 1:
                report.add(
                    name(BUNDLE_MANIFEST),
                    f"{relative} is listed more than once in files",
                    rank=Rank.INTEGRITY,
                    code="duplicate-file",
                    line=bundle_doc.line_of(pointer),
                    pointer=pointer,
                )
            continue
        listed.add(relative)
        path = safe_child(root, relative)
        if path is None:
            report.add(
                name(BUNDLE_MANIFEST),
                f"{relative} points outside the bundle",
                rank=Rank.INTEGRITY,
                code="path-escape",
                line=bundle_doc.line_of(pointer),
                pointer=pointer,
            )
        elif not path.is_file():
            report.add(name(relative), "listed in bundle.json but missing", rank=Rank.INTEGRITY, code="missing-file")
        else:
            actual, size = digest_file(path)
            if actual != get(entry, "sha256"):
                report.add(
                    name(relative),
                    f"digest mismatch: bundle.json lists {get(entry, 'sha256')}, file has {actual}",
                    rank=Rank.INTEGRITY,
                    code="file-digest",
                )
            elif size != get(entry, "size"):
                report.add(
                    name(relative),
                    f"size mismatch: bundle.json lists {get(entry, 'size')}, file has {size}",
                    rank=Rank.INTEGRITY,
                    code="file-size",
                )
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if path.is_symlink():
            report.add(name(relative), "symbolic links are not allowed in a bundle", rank=Rank.INTEGRITY, code="link")
        elif path.is_file() and relative not in (BUNDLE_MANIFEST, SIGNATURE_FILE) and relative not in listed:
            report.add(
                name(relative),
                "file is not listed in bundle.json, so the seal does not cover it",
                rank=Rank.INTEGRITY,
                code="unlisted-file",
            )


#: The members of bundle.json naming the documents every bundle must hold, sealed.
REQUIRED_DOCUMENTS = ("run_manifest", "rows", "metrics")


def _required_documents(
    root: Path, manifest: dict[str, Any], bundle_doc: SourceDocument, name: Callable[[str], str], report: Report
) -> tuple[Path, Path, Path] | None:
    """The run manifest, rows and metrics files: each must exist, be a regular file and be listed in ``files``.

    A bundle whose manifest names a missing document is refused outright (a
    check that is skipped cannot fail), and so is one whose document the seal
    does not cover, so what is validated is always what was sealed.
    """
    sealed = {get(entry, "path") for entry in get(manifest, "files", default=[]) or []}
    found: list[Path] = []
    for member in REQUIRED_DOCUMENTS:
        relative = manifest[member]["path"]
        pointer = f"/{member}/path"
        path = safe_child(root, relative)
        problem, code = None, "missing-document"
        if path is None:
            problem = f"{member}.path {relative!r} points outside the bundle"
        elif (root / relative).is_symlink() or not path.is_file():
            problem = f"{member}.path names {relative}, which is not a file in the bundle"
        elif relative not in sealed:
            problem, code = (
                f"{member}.path names {relative}, which files does not list, so no seal covers it",
                ("unsealed-document"),
            )
        if problem is not None:
            line = bundle_doc.line_of(pointer)
            report.add(name(BUNDLE_MANIFEST), problem, rank=Rank.INTEGRITY, code=code, line=line, pointer=pointer)
        elif path is not None:
            found.append(path)
    return (found[0], found[1], found[2]) if len(found) == 3 else None


def _resolve_pack(identity: dict[str, Any], registry: Registry, pack_root: Path | None) -> tuple[Pack | None, str]:
    if pack_root is not None:
        return Pack.from_directory(pack_root), str(pack_root)
    pack = registry.get("packs", identity.get("name"))
    return pack, f"installed pack {identity.get('name')}"


def validate_bundle(
    root: Path,
    report: Report,
    registry: Registry,
    *,
    label: str,
    pack_root: Path | None = None,
    replay: bool = False,
) -> None:
    """Validate a bundle directory, recording findings in ``report``.

    With ``replay``, every exec row's recorded tool calls are also made again
    in a fresh sandbox (:mod:`._replay`), which runs the calls confined.
    """

    def name(relative: str) -> str:
        return f"{label}/{relative}"

    bundle_doc = read_document(root / BUNDLE_MANIFEST, name(BUNDLE_MANIFEST), report)
    if bundle_doc is None:
        return
    manifest = bundle_doc.data
    if not isinstance(manifest, dict) or not check_schema(bundle_doc, "bundle", name(BUNDLE_MANIFEST), report):
        return
    # Hashing the files (hashlib releases the GIL) overlaps with parsing the
    # rows; its findings go to a report of their own, merged in a fixed place
    # so the output order never depends on thread timing.
    seal_report = Report(report.target)
    with ThreadPoolExecutor(max_workers=1) as pool:
        seal = pool.submit(_check_seal, root, manifest, bundle_doc, name, seal_report)
        try:
            # The parsed rows stay alive through re-derivation and the metrics: see _without_gc.
            _without_gc(_check_contents, root, manifest, bundle_doc, name, report, registry, pack_root, replay)
        finally:
            seal.result()
            report.issues[:0] = seal_report.issues
    _check_signature(root, manifest, name, report)


def _check_signature(root: Path, manifest: dict[str, Any], name: Callable[[str], str], report: Report) -> None:
    """Verify ``signature.json`` when there is one; the signer's fingerprint becomes a fact of the report."""
    from ..signing import SignatureError, read_signature, verify_signature

    path = root / SIGNATURE_FILE
    report.facts["signer"] = None
    if not path.exists() and not path.is_symlink():
        return
    if path.is_symlink() or not path.is_file():
        report.add(name(SIGNATURE_FILE), "must be a regular file", rank=Rank.INTEGRITY, code="signature")
        return
    try:
        document = read_signature(path)
        if isinstance(document, dict) and not check_schema(
            SourceDocument(path, document), "signature", name(SIGNATURE_FILE), report
        ):
            return
        report.facts["signer"] = verify_signature(document, digest_document(manifest))
    except SignatureError as exc:
        report.add(name(SIGNATURE_FILE), str(exc), rank=Rank.INTEGRITY, code="signature")


def _check_contents(
    root: Path,
    manifest: dict[str, Any],
    bundle_doc: SourceDocument,
    name: Callable[[str], str],
    report: Report,
    registry: Registry,
    pack_root: Path | None,
    replay: bool = False,
) -> None:
    """Everything after the seal: run manifest, pack identity, rows, metrics."""

    documents = _required_documents(root, manifest, bundle_doc, name, report)
    if documents is None:
        return
    run_path, rows_path, metrics_path = documents

    # ------------------------------------------------------------ run manifest
    run_rel = manifest["run_manifest"]["path"]
    run_doc = read_document(run_path, name(run_rel), report)
    if (
        run_doc is None
        or not isinstance(run_doc.data, dict)
        or not check_schema(run_doc, "run_manifest", name(run_rel), report)
    ):
        return
    run = run_doc.data
    if digest_document(run) != manifest["run_manifest"]["digest"]:
        report.add(
            name(BUNDLE_MANIFEST),
            f"run manifest digest mismatch: bundle.json says {manifest['run_manifest']['digest']}, "
            f"{run_rel} gives {digest_document(run)}",
            rank=Rank.INTEGRITY,
            code="run-digest",
            line=bundle_doc.line_of("/run_manifest/digest"),
            pointer="/run_manifest/digest",
        )
    report.facts["run_id"] = run["run_id"]

    # ------------------------------------------------------------ pack identity
    identity = manifest["pack"]
    report.facts["pack"] = identity
    if run["pack"] != identity:
        report.add(
            name(BUNDLE_MANIFEST),
            f"pack identity differs from the run manifest's ({run['pack']})",
            rank=Rank.INTEGRITY,
            code="pack-identity",
            line=bundle_doc.line_of("/pack"),
            pointer="/pack",
        )
    pack, where = _resolve_pack(identity, registry, pack_root)
    case_index: Mapping[str, Mapping[str, Any]] = {}
    if pack is None:
        report.add(
            name(BUNDLE_MANIFEST),
            f"pack {identity['name']}@{identity['version']} is not installed; install it or pass --pack DIR",
            rank=Rank.REFERENCE,
            code="unknown-pack",
            line=bundle_doc.line_of("/pack/name"),
            pointer="/pack/name",
        )
    else:
        try:
            problem = pack.integrity_problem()
            pack_manifest = pack.parts.members
        except Exception as exc:  # noqa: BLE001 - an untrusted pack that fails to read in any way is a finding, not a crash
            problem, pack_manifest = f"it cannot be read ({exc})", {}
        if problem is not None:
            report.add(
                name(BUNDLE_MANIFEST),
                f"{where} is not intact: {problem} (run 'assay validate' on it)",
                rank=Rank.INTEGRITY,
                code="pack-integrity",
                line=bundle_doc.line_of("/pack"),
                pointer="/pack",
            )
        elif pack_manifest.get("version") != identity["version"] or pack_manifest.get("digest") != identity["digest"]:
            report.add(
                name(BUNDLE_MANIFEST),
                f"pack identity mismatch: bundle names {identity['name']}@{identity['version']} "
                f"{identity['digest']}, {where} is {pack_manifest.get('name')}@{pack_manifest.get('version')} "
                f"{pack_manifest.get('digest')}",
                rank=Rank.INTEGRITY,
                code="pack-identity",
                line=bundle_doc.line_of("/pack/digest"),
                pointer="/pack/digest",
            )
        else:
            case_index = pack.case_index()
            # Numbers about a pack the validator refuses say nothing a reader can use (its cases may lay down
            # what no run may, or score what the spec does not define): the bundle is refused with the pack.
            problems = pack_problems(pack.root, str(identity["digest"]), registry, label=where)
            if problems:
                report.add(
                    name(BUNDLE_MANIFEST),
                    f"{where} does not validate ({len(problems)} problem{'s' if len(problems) != 1 else ''}; "
                    f"first: {problems[0].format()}): a bundle of a pack that does not validate does not "
                    f"validate (every problem: assay validate {pack.root})",
                    rank=Rank.REFERENCE,
                    code="pack-invalid",
                    line=bundle_doc.line_of("/pack"),
                    pointer="/pack",
                )

    plan = run["plan"]
    if case_index:
        for position, case_id in enumerate(plan["cases"]):
            if case_id not in case_index:
                pointer = f"/plan/cases/{position}"
                report.add(
                    name(run_rel),
                    f"planned case {case_id!r} is not in pack {identity['name']}@{identity['version']}",
                    rank=Rank.REFERENCE,
                    code="unknown-case",
                    line=run_doc.line_of(pointer),
                    pointer=pointer,
                )
    if case_index:
        _check_sampling(plan, case_index, registry, run_doc, name(run_rel), report)
    _check_run_references(run, run_doc, name(run_rel), registry, report)
    check_provenance(run, run_doc, name(run_rel), registry, report, used_components(run))
    outcome_checks = _extension_stages(run, run_doc, name(run_rel), registry, report)

    # ------------------------------------------------------------ rows
    rows_rel = manifest["rows"]["path"]
    rederiving = case_of = None
    if pack is not None and case_index:
        from ..rederive import RederiveSetup
        from ._parallel import PARALLEL_BYTES, RederiveJob
        from ._rederive import deterministic_judges, rederiving_stages

        case_of = _case_loader(pack, case_index)
        setup = RederiveSetup(deterministic_judges(registry), registry.items("oracles"), pack.root)
        rederiving = RederiveJob.prepare(case_of, rederiving_stages(registry), setup, name(rows_rel))
        if rows_path.stat().st_size >= PARALLEL_BYTES:
            # A large bundle is re-derived by a child that reads the rows itself, while they are read and checked
            # here and the metrics recomputed: two cores at work from the first row. Findings join at the end.
            rederiving.fork(lambda: _candidate_rows(rows_path))
    lines, offsets = array("q"), array("q")
    # The claimed metrics are read first, so that the rows go past them once as they are read and checked, and are
    # never held (a million rows take the memory of a thousand); their findings come after the rows', as ever.
    claims_report = Report(report.target)
    cases = pack.cases_by_id() if pack is not None and case_index else {}
    claims = _read_claims(manifest, bundle_doc, metrics_path, run, run_doc, run_rel, name, claims_report, registry)
    recompute = _Recompute(claims, MetricContext(plan=run["plan"], cases=cases), registry)
    kept: list[dict[str, Any]] | None = [] if replay else None  # replaying needs the rows; it is made for few
    health = HealthTally(registry.items("outcomes"))
    count: int | None = None

    def accept(row: dict[str, Any]) -> None:
        recompute.add(row)
        if kept is not None:
            kept.append(row)

    try:
        count = _check_rows(
            rows_path, name(rows_rel), run, case_index, registry, report, lines, offsets, accept, outcome_checks, health
        )
        if count is None:
            return
        if kept is not None and pack is not None and case_of is not None:
            from ._replay import replay_rows

            replayed = replay_rows(kept, lines, run, case_of, registry, pack.root, name(rows_rel), report)
            for stage, replayed_count in replayed.items():
                report.facts[f"{stage}_rows_replayed"] = replayed_count
        kept = None
        if count != manifest["rows"]["count"]:
            report.add(
                name(BUNDLE_MANIFEST),
                f"rows count says {manifest['rows']['count']}, {rows_rel} has {count}",
                rank=Rank.INTEGRITY,
                code="row-count",
                line=bundle_doc.line_of("/rows/count"),
                pointer="/rows/count",
            )
        report.facts["rows"] = count
        # Not problems (a dead endpoint's rows are a faithful record), but the summary must not read as a clean run.
        report.facts["health_warnings"] = health_warnings(health.result())
        report.issues.extend(claims_report.issues)
        if claims is not None:
            _check_recomputed(claims, recompute, name, report)
    finally:
        if rederiving is not None and count is not None:
            report.facts["verdicts_rederived"] = rederiving.finish(report, lines, _reader(rows_path, lines, offsets))
        elif rederiving is not None:
            rederiving.abandon()


@dataclass
class _Claims:
    """A bundle's claimed metrics, read before its rows: the summary and which registered metrics it claims."""

    document: SourceDocument
    file: str
    claims: list[dict[str, Any]]
    names: set[str]


class _Recompute:
    """The claimed metrics recomputed as the accepted rows go past (see :class:`assay.summary.SummaryPass`).

    A metric plugin failing on a hostile row is a finding, not a crash: the
    first failure stops the recomputation and is kept for the report.
    """

    def __init__(self, claims: _Claims | None, context: MetricContext, registry: Registry) -> None:
        self.error: Exception | None = None
        self._summary: SummaryPass | None = None
        if claims is not None:
            try:
                self._summary = SummaryPass(context, registry, claims.names)
            except Exception as exc:  # noqa: BLE001 - plugin boundary, as below
                self.error = exc

    def add(self, row: dict[str, Any]) -> None:
        """Pass one accepted row to the claimed metrics."""
        if self._summary is None:
            return
        try:
            self._summary.add(row)
        except Exception as exc:  # noqa: BLE001 - plugin boundary: a metric failing on hostile rows must not crash validation
            self.error, self._summary = exc, None

    def values(self) -> list[MetricValue]:
        """The recomputed values; raises what a metric raised."""
        if self.error is not None:
            raise self.error
        assert self._summary is not None
        return self._summary.values()


def _read_claims(
    manifest: dict[str, Any],
    bundle_doc: SourceDocument,
    metrics_path: Path,
    run: dict[str, Any],
    run_doc: SourceDocument,
    run_rel: str,
    name: Callable[[str], str],
    report: Report,
    registry: Registry,
) -> _Claims | None:
    """The metrics summary: sealed, schema-valid, every claim a registered metric (None when it cannot be read)."""
    metrics_rel = manifest["metrics"]["path"]
    metrics_doc = read_document(metrics_path, name(metrics_rel), report)
    if (
        metrics_doc is None
        or not isinstance(metrics_doc.data, dict)
        or not check_schema(metrics_doc, "metrics_summary", name(metrics_rel), report)
    ):
        return None
    claims = metrics_doc.data["metrics"]
    if digest_document(metrics_doc.data) != manifest["metrics"]["digest"]:
        report.add(
            name(BUNDLE_MANIFEST),
            f"metrics digest mismatch: bundle.json says {manifest['metrics']['digest']}, "
            f"{metrics_rel} gives {digest_document(metrics_doc.data)}",
            rank=Rank.INTEGRITY,
            code="metrics-digest",
            line=bundle_doc.line_of("/metrics/digest"),
            pointer="/metrics/digest",
        )
    known = set(registry.names("metrics"))
    names = set()
    for index, claim in enumerate(claims):
        if claim["metric"] not in known:
            pointer = f"/metrics/{index}/metric"
            report.add(
                name(metrics_rel),
                f"metric {claim['metric']!r} is not a registered plugin",
                rank=Rank.REFERENCE,
                code="unknown-metric",
                line=metrics_doc.line_of(pointer),
                pointer=pointer,
            )
        else:
            names.add(claim["metric"])
    check_provenance(run, run_doc, name(run_rel), registry, report, {("metrics", metric) for metric in names})
    return _Claims(metrics_doc, name(metrics_rel), claims, names)


def _check_recomputed(claims: _Claims, recompute: _Recompute, name: Callable[[str], str], report: Report) -> None:
    """Every claimed number of a registered metric against the one recomputed from the rows."""
    try:
        recomputed = recompute.values()
    except Exception as exc:  # noqa: BLE001 - plugin boundary: a metric failing on hostile rows must not crash validation
        which, cause = "", exc if not isinstance(exc, MetricFailure) else (exc.__cause__ or exc)
        if isinstance(exc, MetricFailure):
            which = f"metric {exc.metric}: "
        report.add(
            claims.file,
            f"metrics could not be recomputed: {which}{type(cause).__name__}: {cause}",
            rank=Rank.METRICS,
            code="metric-error",
        )
        return
    names = claims.names
    mismatches = compare_claims([c for c in claims.claims if c["metric"] in names], recomputed)
    claimed_index = [i for i, c in enumerate(claims.claims) if c["metric"] in names]
    for mismatch in mismatches[:_MAX_LISTED]:
        pointer = f"/metrics/{claimed_index[mismatch.index]}"
        field_pointer = pointer + ("" if mismatch.field == "group" else f"/{mismatch.field}")
        report.add(
            claims.file,
            mismatch.message,
            rank=Rank.METRICS,
            code="metric-mismatch",
            line=claims.document.line_of(field_pointer),
            pointer=field_pointer,
        )
    if len(mismatches) > _MAX_LISTED:
        report.add(
            claims.file,
            f"{len(mismatches) - _MAX_LISTED} more claimed numbers are not reproduced",
            rank=Rank.METRICS,
            code="metric-mismatch",
        )
    report.facts["metrics_checked"] = len(claimed_index)


def _check_sampling(
    plan: dict[str, Any],
    case_index: Mapping[str, Mapping[str, Any]],
    registry: Registry,
    run_doc: SourceDocument,
    name: str,
    report: Report,
) -> None:
    """The plan's cases must be exactly the pack's selection for the recorded sampling, drawn again here.

    The engine plans the cases whose family supports a planned stage, then
    applies the sampling (every case, the first N, or N per family drawn with
    the recorded seed). A plan that drops the cases an endpoint failed, or
    draws its own sample, no longer equals that selection.
    """
    from ..engine.planner import RunnableCases, family_of, one_per_family, select_cases
    from ..errors import UsageError

    sampling = plan.get("sampling") or {}
    runs = set()
    for case_id in one_per_family(case_index):
        family = registry.get("families", family_of(case_index, case_id))
        if family is None:
            return  # an unregistered family is reported elsewhere; the selection cannot be redrawn
        if set(family.stages) & set(plan["stages"]):
            runs.add(family_of(case_index, case_id))
    runnable = RunnableCases(case_index, frozenset(runs))  # a view of the index, not a copy of it
    strategy = sampling.get("strategy")
    try:
        if strategy == "all":
            expected, _ = select_cases(runnable)
        elif strategy in ("stratified", "limit") and isinstance(sampling.get("n"), int):
            seed = sampling.get("seed", 0)
            expected, _ = select_cases(
                runnable, sample=(str(strategy), int(sampling["n"])), sample_seed=seed if isinstance(seed, int) else 0
            )
        else:
            return  # a sampling this engine does not know is a schema matter
    except UsageError:
        return
    if sorted(plan["cases"]) == expected:
        return
    lacking = sorted(set(expected) - set(plan["cases"]))
    added = sorted(set(plan["cases"]) - set(expected))
    described = ", ".join(f"{k}={v}" for k, v in sorted(sampling.items()))
    parts = []
    if lacking:
        parts.append(f"lacks {len(lacking)} ({', '.join(lacking[:5])}{', ...' if len(lacking) > 5 else ''})")
    if added:
        parts.append(f"adds {len(added)} ({', '.join(added[:5])}{', ...' if len(added) > 5 else ''})")
    report.add(
        name,
        f"the planned cases are not the pack's selection for sampling {described}: the plan {' and '.join(parts)}",
        rank=Rank.COMPLETENESS,
        code="sample-mismatch",
        line=run_doc.line_of("/plan/cases"),
        pointer="/plan/cases",
    )


def _extension_stages(
    run: dict[str, Any], run_doc: SourceDocument, name: str, registry: Registry, report: Report
) -> dict[str, CompiledSchema]:
    """The outcome schema of each plugin stage the run planned, as registered here and recorded by the run.

    A planned stage the run recorded no schema for, a stage whose plugin is
    not installed here (the finding names the distribution to install) and
    an installed plugin whose schema differs from the one the run recorded
    are findings; their rows' outcomes are then not checked one by one.
    """
    from ..extensions import outcome_schema

    recorded = run.get("stage_schemas", {})
    checks: dict[str, CompiledSchema] = {}
    for position, stage in enumerate(run["plan"]["stages"]):
        if stage in STAGES:
            continue
        entry = recorded.get(stage)
        if entry is None:
            pointer = f"/plan/stages/{position}"
            report.add(
                name,
                f"planned stage {stage!r} has no entry in stage_schemas, so its outcomes cannot be checked",
                rank=Rank.INTEGRITY,
                code="stage-schema-missing",
                line=run_doc.line_of(pointer),
                pointer=pointer,
            )
            continue
        pointer = f"/stage_schemas/{stage}"
        installed = registry.registration("stages", stage)
        distribution, version = entry["distribution"], entry["version"]
        wanted = (distribution if version is None else f"{distribution}=={version}") if distribution else None
        if installed is None:
            hint = (
                f"install it (pip install '{wanted}') and validate again"
                if wanted
                else "it was registered in-process by no distribution, so only its author can validate this bundle"
            )
            report.add(
                name,
                f"stage {stage!r} comes from a plugin that is not installed here: {hint}",
                rank=Rank.REFERENCE,
                code="unknown-stage",
                line=run_doc.line_of(pointer),
                pointer=pointer,
            )
            continue
        digest = digest_document(installed.component.outcome_schema)
        if digest != entry["digest"]:
            have = f"{installed.distribution} {installed.version}" if installed.distribution else "the installed plugin"
            report.add(
                name,
                f"stage {stage!r}: {have} registers the outcome schema {digest}, the run recorded {entry['digest']}"
                + (f"; install the version the run used (pip install '{wanted}')" if wanted else ""),
                rank=Rank.INTEGRITY,
                code="stage-schema-digest",
                line=run_doc.line_of(pointer + "/digest"),
                pointer=pointer + "/digest",
            )
            continue
        try:
            checks[stage] = outcome_schema(installed.component.outcome_schema)
        except SpecError as exc:  # the installed plugin's schema is broken: no row of the stage can be checked
            report.add(
                name,
                f"stage {stage!r}: the installed plugin's outcome schema cannot be used: {exc}",
                rank=Rank.REFERENCE,
                code="stage-schema-unusable",
                line=run_doc.line_of(pointer),
                pointer=pointer,
            )
    return checks


def _judge_label(entry: Mapping[str, Any] | None) -> str:
    if entry is None:
        return "none"
    return " ".join(
        str(part) for part in (entry.get("name"), entry.get("version"), entry.get("model")) if part is not None
    )


def _check_run_references(
    run: dict[str, Any], run_doc: SourceDocument, name: str, registry: Registry, report: Report
) -> None:
    def add(pointer: str, message: str, code: str) -> None:
        report.add(name, message, rank=Rank.REFERENCE, code=code, line=run_doc.line_of(pointer), pointer=pointer)

    planned = set(run["plan"]["conditions"])
    described = {condition["id"] for condition in run["conditions"]}
    for missing in sorted(planned - described):
        add("/conditions", f"planned condition {missing!r} has no entry in conditions", "undescribed-condition")
    for index, condition in enumerate(run["conditions"]):
        if condition["kind"] not in ("defense", "prompt_condition", "permission_baseline"):
            continue
        kind = condition["kind"].replace("_", " ")
        defense = registry.get("defenses", condition["id"])
        if defense is None:
            add(f"/conditions/{index}/id", f"{kind} {condition['id']!r} is not a registered plugin", "unknown-defense")
        elif defense.document.get("digest") != condition["digest"]:
            add(
                f"/conditions/{index}/digest",
                f"{kind} {condition['id']} digest {condition['digest']} differs from the registered policy's "
                f"{defense.document.get('digest')}",
                "defense-digest",
            )
    for index, judge in enumerate(run["judges"]):
        installed = registry.registration("judges", judge["name"])
        if installed is None:
            add(f"/judges/{index}/name", f"judge {judge['name']!r} is not a registered plugin", "unknown-judge")
        # Who judged is checked, not taken: the recorded registration, version and prompt digest are the
        # installed judge's, or the verdicts are another judge's (see assay.judging).
        for suffix, message in judge_problems(judge, installed):
            add(f"/judges/{index}{suffix}", message, "judge-mismatch")
    planned_endpoints = set(run["plan"]["endpoints"])
    described_endpoints = {endpoint["id"] for endpoint in run["endpoints"]}
    for missing in sorted(planned_endpoints - described_endpoints):
        add("/endpoints", f"planned endpoint {missing!r} has no entry in endpoints", "undescribed-endpoint")


def _without_gc(function: Callable[_P, _R], *args: _P.args, **kwargs: _P.kwargs) -> _R:
    # Keeping 10^4 parsed rows alive makes the cyclic collector rescan a growing
    # heap again and again while parsing (JSON trees hold no cycles); pausing
    # it for the parse halves the time it takes.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return function(*args, **kwargs)
    finally:
        if enabled:
            gc.enable()


#: The largest row read, and how many unreadable rows running stop the reading of a rows file.
MAX_ROW_BYTES = 16 << 20
MAX_UNREADABLE_ROWS = 1_000


class Unreadable(Exception):
    """The rows file holds too many unreadable rows running to be read on."""


def _row_lines(path: Path) -> Iterator[tuple[int, int, bytes | None, bool]]:
    """(line number, its byte offset, the row's bytes or None when over :data:`MAX_ROW_BYTES`, whether it ended
    with a newline).

    Read a line at a time with a bound on what is held: neither a huge row
    nor millions of blank lines are ever in memory at once. (A buffered
    ``readline`` copies each row once; splitting large chunks copied it twice.)
    """
    number = offset = 0
    with open(path, "rb", buffering=_READ_BUFFER) as handle:
        while line := handle.readline(MAX_ROW_BYTES + 1):
            number += 1
            start, offset = offset, offset + len(line)
            if line.endswith(b"\n"):
                yield number, start, line[:-1], True
            elif len(line) <= MAX_ROW_BYTES:
                yield number, start, line, False  # the last line, without its newline
            else:  # over the bound: its bytes are dropped up to its newline
                while line and not line.endswith(b"\n"):
                    line = handle.readline(MAX_ROW_BYTES + 1)
                    offset += len(line)
                yield number, start, None, bool(line)


_READ_BUFFER = 1 << 20


def _parse_row(raw: bytes | None) -> tuple[Any, str | None, str]:
    """(parsed row, the problem or None, the finding code)."""
    if raw is None:
        return None, f"row is larger than {MAX_ROW_BYTES >> 20} MiB, so it was not read", "row-size"
    try:
        return orjson.loads(raw), None, ""
    except (orjson.JSONDecodeError, RecursionError) as exc:
        return None, f"not a JSON row: {str(exc).splitlines()[0]}", "parse"


def _row_error(
    report: Report, file: str, line: int, pointer: str, message: str, rank: Rank, code: str, counts: dict[str, int]
) -> None:
    counts[code] = counts.get(code, 0) + 1
    if counts[code] <= _MAX_LISTED:
        report.add(file, message, rank=rank, code=code, line=line, pointer=pointer)


#: The rank of a stage's RowProblem by its kind.
_PROBLEM_RANKS = {"reference": Rank.REFERENCE, "completeness": Rank.COMPLETENESS, "integrity": Rank.INTEGRITY}


def _candidate_rows(path: Path) -> Iterator[tuple[dict[str, Any], int]]:
    """Every schema-valid row of a rows file with its line, as read: a superset of what :func:`_check_rows` keeps.

    Only the schema decides here (not duplicates or the plan), so nothing a
    hostile row could be is handed to re-derivation that the schema refuses.
    Raises :class:`Unreadable` where :func:`_check_rows` gives up (too many
    unreadable rows running).
    """
    unreadable = 0
    for number, _, raw, _ in _row_lines(path):
        row, problem, _ = _parse_row(raw)
        if problem is not None:
            unreadable += 1
            if unreadable >= MAX_UNREADABLE_ROWS:
                raise Unreadable(f"{MAX_UNREADABLE_ROWS} rows running could not be read")
            continue
        unreadable = 0
        if _schema_valid(row):
            yield row, number


def _schema_valid(row: Any) -> bool:
    """True for a row object of a supported spec version that its schema accepts."""
    return (
        isinstance(row, dict)
        and major_of(row.get("spec_version")) in SUPPORTED_MAJORS
        and spec_schemas(SUPPORTED_MAJORS[-1]).is_valid("result_row", row)
    )


_RowsAt = Callable[[Sequence[int]], tuple[list[dict[str, Any]], list[int]]]


def _reader(path: Path, lines: Sequence[int], offsets: Sequence[int]) -> _RowsAt:
    """The whole rows at some of ``lines`` (found at byte ``offsets``), read again: those the schema still accepts.

    What re-derivation reads, since the validation holds none of the rows: a
    chunk at a time, from where each row was found (``lines`` rise, so each
    is found by bisection, not through a table of every row).
    """

    def rows_at(wanted: Sequence[int]) -> tuple[list[dict[str, Any]], list[int]]:
        rows: list[dict[str, Any]] = []
        found: list[int] = []
        with open(path, "rb", buffering=_READ_BUFFER) as handle:
            for line in wanted:
                handle.seek(offsets[bisect_left(lines, line)])
                row, problem, _ = _parse_row(handle.readline(MAX_ROW_BYTES + 1).rstrip(b"\n"))
                if problem is None and _schema_valid(row):
                    rows.append(row)
                    found.append(line)
        return rows, found

    return rows_at


def _case_loader(pack: Pack, case_index: Mapping[str, Mapping[str, Any]]) -> Callable[[str], dict[str, Any] | None]:
    """A ``case_id -> case data`` reader over an intact pack (None for a case it cannot give), keeping the most
    recently read cases (rows come case by case; a pack of a million cases is not held)."""
    from ..documents import DocumentError, load_document

    cases: dict[str, dict[str, Any] | None] = {}

    def case_of(case_id: str) -> dict[str, Any] | None:
        if case_id in cases:
            case = cases[case_id] = cases.pop(case_id)  # the most recently used goes last
            return case
        entry = case_index.get(case_id)
        try:
            case = None if entry is None else load_document(pack.root / entry["path"]).data
        except (DocumentError, OSError):
            case = None  # the pack's integrity check above reports an unreadable case file
        if len(cases) >= _CASES_KEPT:
            del cases[next(iter(cases))]
        cases[case_id] = case
        return case

    return case_of


#: Parsed cases a validation keeps (see :func:`_case_loader`).
_CASES_KEPT = 512


def _check_rows(
    path: Path,
    file: str,
    run: dict[str, Any],
    case_index: Mapping[str, Mapping[str, Any]],
    registry: Registry,
    report: Report,
    lines: MutableSequence[int] | None = None,
    offsets: MutableSequence[int] | None = None,
    accept: Callable[[dict[str, Any]], None] | None = None,
    outcome_checks: Mapping[str, CompiledSchema] | None = None,
    health: HealthTally | None = None,
) -> int | None:
    """Parse, schema-check and key-check every row; returns how many were accepted (None when the file could not
    be read on).

    Each accepted row is passed to ``accept`` and let go: nothing here holds
    the rows. ``lines`` and ``offsets`` receive the line number and byte
    offset of each. ``outcome_checks`` are the outcome schemas of the plugins'
    stages the run planned (see :func:`_extension_stages`). ``health`` counts
    every accepted row (see :mod:`assay.health`).
    """
    plan = run["plan"]
    scripted = {endpoint["id"]: bool(endpoint.get("scripted", False)) for endpoint in run["endpoints"]}
    run_judges = {judge["name"] for judge in run["judges"]}
    # The produced_by each judged stage's verdicts must carry: the manifest's judge of that stage.
    stage_judges = {judge["stage"]: judge for judge in run["judges"]}
    applied_check = ConditionCheck(registry, plan["stages"])
    schemas = spec_schemas(SUPPORTED_MAJORS[-1])
    stages = frozenset(plan["stages"])
    # What each planned stage checks of a row beyond the schema (the audit gate, say): its plugin's check_row.
    row_checks = [
        (name, stage.check_row)
        for name, stage in registry.items("stages").items()
        if name in stages and stage.check_row is not None
    ]
    judges = set(registry.names("judges"))
    counts: dict[str, int] = {}
    seen = _FirstLines(plan, path.stat().st_size)
    accepted = 0
    unreadable = 0
    for number, offset, raw, ended in _row_lines(path):
        if not ended:
            report.add(
                file,
                "the last row does not end with a newline (truncated file?)",
                rank=Rank.UNREADABLE,
                code="truncated",
                line=number,
            )
        row, problem, code = _parse_row(raw)
        if problem is not None:
            unreadable += 1
            _row_error(report, file, number, "", problem, Rank.UNREADABLE, code, counts)
            if unreadable >= MAX_UNREADABLE_ROWS:
                # Blank lines compress to nothing: a small upload could otherwise hold millions of findings.
                message = f"stopped reading at line {number}: {MAX_UNREADABLE_ROWS} rows running could not be read"
                report.add(file, message, rank=Rank.UNREADABLE, code="parse", line=number)
                return None
            continue
        unreadable = 0
        if not isinstance(row, dict):
            _row_error(report, file, number, "", "a row must be a JSON object", Rank.SCHEMA, "schema:type", counts)
            continue
        version = row.get("spec_version")
        if major_of(version) not in SUPPORTED_MAJORS:
            _row_error(
                report,
                file,
                number,
                "/spec_version",
                f"spec_version {version!r} is not supported",
                Rank.SCHEMA,
                "spec-version",
                counts,
            )
            continue
        if not schemas.is_valid("result_row", row):
            violation = schemas.violations("result_row", row)[0]
            _row_error(report, file, number, violation.pointer, violation.message, Rank.SCHEMA, "schema", counts)
            continue
        key = row["key"]
        ident = (key["case_id"], key["endpoint"], key["condition"], key["seed"], key["epoch"], key["protocol"])
        position = seen.matrix.position(ident)
        first = seen.first(ident, position, number)
        if first is not None:
            _row_error(
                report,
                file,
                number,
                "/key",
                f"duplicate row: same key as line {first}",
                Rank.COMPLETENESS,
                "duplicate-row",
                counts,
            )
            continue
        if position is None:
            outside = [field for axis, field in enumerate(KEY_FIELDS) if seen.matrix.find(axis, key[field]) is None]
            _row_error(
                report,
                file,
                number,
                f"/key/{outside[0]}",
                f"{outside[0]} {key[outside[0]]!r} is not in the run's plan",
                Rank.COMPLETENESS,
                "unplanned-row",
                counts,
            )
            continue
        entry = case_index.get(key["case_id"])
        expected_digest = entry.get("sha256") if entry is not None else None
        if expected_digest is not None and row["case_digest"] != expected_digest:
            _row_error(
                report,
                file,
                number,
                "/case_digest",
                f"case_digest differs from the pack's {key['case_id']} ({expected_digest})",
                Rank.INTEGRITY,
                "case-digest",
                counts,
            )
        row_stages = row["stages"]
        if not stages.issuperset(row_stages):
            extra = sorted(set(row_stages) - stages)
            _row_error(
                report,
                file,
                number,
                f"/stages/{extra[0]}",
                f"stage {extra[0]!r} is not in the run's plan",
                Rank.REFERENCE,
                "unplanned-stage",
                counts,
            )
        shaped = True  # every outcome fits its schema: only then do the stages' own checks read the row
        if outcome_checks:
            for stage_name in outcome_checks.keys() & row_stages.keys():
                violations = outcome_checks[stage_name].violations(row_stages[stage_name])
                if violations:
                    shaped = False
                    pointer = f"/stages/{stage_name}{violations[0].pointer}"
                    message = f"{violations[0].message} (the outcome schema stage {stage_name} registered)"
                    _row_error(report, file, number, pointer, message, Rank.SCHEMA, "stage-schema", counts)
        for stage_name, check in row_checks if shaped else ():
            try:
                problems = list(check(row, stages))
            except Exception as exc:  # noqa: BLE001 - plugin boundary: a check failing on a hostile row is a finding
                why = f"stage {stage_name}'s row check failed on this row ({type(exc).__name__})"
                _row_error(report, file, number, "", why, Rank.REFERENCE, "row-check-error", counts)
                continue
            for problem in problems:
                rank = _PROBLEM_RANKS.get(problem.kind, Rank.REFERENCE)
                _row_error(report, file, number, problem.pointer, problem.message, rank, problem.code, counts)
        if key["endpoint"] in scripted and row["scripted"] != scripted[key["endpoint"]]:
            _row_error(
                report,
                file,
                number,
                "/scripted",
                f"row says scripted is {str(row['scripted']).lower()}, the run manifest says endpoint "
                f"{key['endpoint']!r} is {'' if scripted[key['endpoint']] else 'not '}scripted",
                Rank.INTEGRITY,
                "scripted-mismatch",
                counts,
            )
        for stage_name, outcome in row_stages.items():
            producer = outcome["produced_by"]
            if producer["kind"] == "judge" and producer["name"] in judges and producer["name"] not in run_judges:
                _row_error(
                    report,
                    file,
                    number,
                    f"/stages/{stage_name}/produced_by/name",
                    f"judge {producer['name']!r} produced this outcome but the run manifest's judges do not list it",
                    Rank.REFERENCE,
                    "unlisted-judge",
                    counts,
                )
            if producer["kind"] == "judge" and producer["name"] in run_judges:
                differs = producer_difference(producer, stage_judges.get(stage_name))
                if differs is not None:
                    _row_error(
                        report,
                        file,
                        number,
                        f"/stages/{stage_name}/produced_by/{differs}",
                        f"the {stage_name} verdict's judge {differs} is {producer.get(differs)!r}; the run "
                        f"manifest's judge of that stage is {_judge_label(stage_judges.get(stage_name))}",
                        Rank.INTEGRITY,
                        "judge-mismatch",
                        counts,
                    )
            if producer["kind"] == "judge" and producer["name"] not in judges:
                _row_error(
                    report,
                    file,
                    number,
                    f"/stages/{stage_name}/produced_by/name",
                    f"judge {producer['name']!r} is not a registered plugin",
                    Rank.REFERENCE,
                    "unknown-judge",
                    counts,
                )
        unapplied = applied_check.problem(row)
        if unapplied is not None:
            pointer, message = unapplied
            _row_error(report, file, number, pointer, message, Rank.INTEGRITY, "condition-not-applied", counts)
        if health is not None:
            health.add(row)
        if accept is not None:
            accept(row)
        accepted += 1
        if lines is not None:
            lines.append(number)
        if offsets is not None:
            offsets.append(offset)
    for code, count in counts.items():
        if count > _MAX_LISTED:
            report.add(
                file, f"{count - _MAX_LISTED} more rows with the same problem ({code})", rank=Rank.SCHEMA, code=code
            )

    for combo in seen.first_missing(_MAX_LISTED):
        report.add(
            file,
            "missing row: case {} x endpoint {} x condition {} x seed {} x epoch {} x protocol {}".format(*combo),
            rank=Rank.COMPLETENESS,
            code="missing-row",
        )
    if seen.missing > _MAX_LISTED:
        report.add(
            file,
            f"{seen.missing - _MAX_LISTED} more planned rows are missing ({seen.missing} of {seen.planned})",
            rank=Rank.COMPLETENESS,
            code="missing-row",
        )
    return accepted


class _FirstLines:
    """The line of each row key's first row, to find duplicates and the planned rows that are missing.

    Held compactly: eight bytes per item of the plan, by its position (see
    :class:`assay.plan_matrix.PlanMatrix`), when the plan is no larger than
    the rows file could fill (a hostile run manifest may plan far more than
    its rows); a dict entry per key otherwise, and for keys outside the plan.
    """

    def __init__(self, plan: Mapping[str, Any], file_size: int) -> None:
        self.matrix = PlanMatrix.of_plan(plan)
        self.planned = self.matrix.size
        compact = self.planned <= max(1 << 16, file_size // _SMALLEST_ROW)
        self._lines: array[int] | None = array("q", bytes(8 * self.planned)) if compact else None
        self._others: dict[tuple[Any, ...], int] = {}
        self._seen_planned = 0

    def first(self, ident: tuple[Any, ...], position: int | None, line: int) -> int | None:
        """The line of the key's first row when it was seen before (a duplicate), else None (and this line is);
        ``position`` is the key's in the plan (None: outside it)."""
        if position is not None and self._lines is not None:
            before = self._lines[position]
            if before:
                return int(before)
            self._lines[position] = line
            self._seen_planned += 1
            return None
        ident = ident if position is None else self.matrix.values_at(position)  # 1 and 1.0: one key, as in a dict
        before_line = self._others.get(ident)
        if before_line is not None:
            return before_line
        self._others[ident] = line
        self._seen_planned += position is not None
        return None

    @property
    def missing(self) -> int:
        """How many planned keys have no row."""
        return self.planned - self._seen_planned

    def first_missing(self, limit: int) -> list[tuple[Any, ...]]:
        """The first ``limit`` planned keys without a row, in plan order: found among at most as many positions
        as there are rows, plus ``limit`` (however large a hostile plan says it is)."""
        found: list[tuple[Any, ...]] = []
        position = 0
        while len(found) < min(limit, self.missing) and position < self.planned:
            if self._lines is not None:
                if not self._lines[position]:
                    found.append(self.matrix.values_at(position))
            elif (values := self.matrix.values_at(position)) not in self._others:
                found.append(values)
            position += 1
        return found


#: Bytes below which no row fits its schema: a plan of more items than a rows file of a size could hold is kept in
#: a dict, not an array.
_SMALLEST_ROW = 64
