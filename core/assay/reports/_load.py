"""Reading a result bundle for a report, and recomputing its metrics from the rows.

A report trusts nothing a bundle claims: it reads the run manifest and the
rows, recomputes every metric with the registered metric plugins, and lists
each place where the claimed ``metrics.json`` differs. Checking the seal and
provenance stays the validator's job (``assay validate``); a report refuses
only files it cannot read or that break the spec, since the metric plugins
assume schema-valid rows.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ..bundle import BUNDLE_MANIFEST, METRICS_FILE, ROWS_FILE, RUN_FILE
from ..components import MetricContext, MetricValue
from ..errors import AssayError, SpecError, UsageError
from ..packs import Pack
from ..plugins import Registry
from ..schemas import SUPPORTED_MAJORS, major_of, spec_schemas
from ..summary import MetricFailure, SummaryPass, compare_claims
from ..validate import extract_archive
from .rowfile import RowFile, spool_rows

__all__ = [
    "BundleFiles",
    "KindsOfCases",
    "ReportData",
    "case_families",
    "claim_differences",
    "open_bundle",
    "read_bundle",
    "recompute",
]


@dataclass(frozen=True)
class BundleFiles:
    """The parsed documents of one bundle; ``label`` names it in messages (the path given).

    ``rows`` is a sequence walked as often as needed; :func:`read_bundle` gives
    a :class:`~assay.reports.rowfile.RowFile` that reads them again from disk
    on each walk, so a reader that keeps only counts stays small on any bundle.
    """

    label: str
    manifest: Mapping[str, Any]
    run: Mapping[str, Any]
    rows: Sequence[Mapping[str, Any]]
    claims: Sequence[Mapping[str, Any]]

    @property
    def pack(self) -> Mapping[str, Any]:
        """The pack identity the bundle names (name, version, digest)."""
        return self.manifest.get("pack") or self.run.get("pack") or {}


@dataclass(frozen=True)
class ReportData:
    """A bundle with its metrics recomputed: what every report renders.

    ``values`` are the recomputed metric values in name order; ``metrics``
    maps each registered metric name to its component (for ``stage`` and
    ``description``); ``families`` says where case families came from;
    ``differences`` lists every claimed number the rows do not reproduce.
    """

    bundle: BundleFiles
    values: Sequence[MetricValue]
    metrics: Mapping[str, Any]
    families: str
    differences: Sequence[str] = field(default_factory=tuple)
    sections: Mapping[str, Any] = field(default_factory=dict)  # the registered report sections, by name
    outcomes: Mapping[str, Any] = field(default_factory=dict)  # the registered outcomes, by name (health checks)
    cases: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # the pack's cases by id, when at hand
    case_kinds: Mapping[str, str] = field(default_factory=dict)  # case id -> its family's kind (attack, benign, ...)

    def applies(self, outcome: Any, row: Mapping[str, Any]) -> bool:
        """Whether a registered outcome is over this row's case (its ``kinds``; an unknown case is over none)."""
        kinds = tuple(getattr(outcome, "kinds", ()) or ())
        return not kinds or self.case_kinds.get(str(row["key"]["case_id"])) in kinds

    @property
    def reproduced(self) -> bool:
        """True when every claimed number is reproduced from the rows."""
        return not self.differences


@contextlib.contextmanager
def open_bundle(path: Path) -> Iterator[Path]:
    """Yield the bundle directory of ``path``: the directory itself, or a zip extracted safely.

    A zip is untrusted input, so it goes through :func:`assay.validate.extract_archive`
    (no traversal, links or bombs) into a temporary folder removed afterwards.
    """
    if not path.exists():
        raise UsageError(f"{path}: no such file or directory")
    if path.is_dir():
        if not (path / BUNDLE_MANIFEST).is_file():
            raise UsageError(f"{path}: not a bundle (no {BUNDLE_MANIFEST})")
        yield path
        return
    if path.suffix.lower() != ".zip":
        raise UsageError(f"{path}: not a bundle directory or .zip")
    with tempfile.TemporaryDirectory(prefix="assay-report-") as scratch:
        root = extract_archive(path, Path(scratch))
        if not (root / BUNDLE_MANIFEST).is_file():
            raise AssayError(f"{path}: the archive holds no {BUNDLE_MANIFEST}")
        yield root


def _inside(root: Path, relative: Any, label: str) -> Path:
    # Paths in bundle.json are untrusted: one must not make a report read a
    # file outside the bundle.
    if not isinstance(relative, str):
        raise SpecError(f"{label}/{BUNDLE_MANIFEST}: a file path is not a string")
    candidate = (root / relative).resolve()
    try:
        candidate.relative_to(root.resolve())
    except ValueError:
        raise SpecError(f"{label}/{BUNDLE_MANIFEST}: {relative} points outside the bundle") from None
    if not candidate.is_file():
        raise SpecError(f"{label}/{relative}: missing")
    return candidate


def _read_json(path: Path, name: str, schema: str) -> dict[str, Any]:
    try:
        data: dict[str, Any] = orjson.loads(path.read_bytes())  # an object once _check has passed
    except (orjson.JSONDecodeError, RecursionError) as exc:
        raise SpecError(f"{name}: not JSON: {str(exc).splitlines()[0]}") from None
    except OSError as exc:
        raise SpecError(f"{name}: cannot read: {exc.strerror or exc}") from None
    _check(data, name, schema)
    return data


def _check(data: Any, name: str, schema: str) -> None:
    version = data.get("spec_version") if isinstance(data, dict) else None
    major = major_of(version)
    if major not in SUPPORTED_MAJORS:
        raise SpecError(f"{name}: spec_version {version!r} is not supported")
    schemas = spec_schemas(major)
    if not schemas.is_valid(schema, data):
        violations = schemas.validate(schema, data)
        detail = (
            f"{violations[0].pointer or '/'}: {violations[0].message}" if violations else "does not satisfy the schema"
        )
        raise SpecError(f"{name}: {detail} (run 'assay validate' for every problem)")


def _read_rows(path: Path, name: str) -> RowFile:
    # A line at a time, into a private copy read again on each walk (see assay.reports.rowfile): a report of a
    # large bundle never holds its rows.
    def check(row: Any, number: int) -> None:
        _check(row, f"{name}:{number}", "result_row")

    return spool_rows(path, name, check)


def read_bundle(path: Path) -> BundleFiles:
    """Read and schema-check a bundle directory or zip: seal, run manifest, rows and claims."""
    label = str(path)
    with open_bundle(path) as root:
        manifest = _read_json(root / BUNDLE_MANIFEST, f"{label}/{BUNDLE_MANIFEST}", "bundle")
        run_rel = manifest["run_manifest"].get("path", RUN_FILE)
        rows_rel = manifest["rows"].get("path", ROWS_FILE)
        metrics_rel = manifest["metrics"].get("path", METRICS_FILE)
        run = _read_json(_inside(root, run_rel, label), f"{label}/{run_rel}", "run_manifest")
        rows = _read_rows(_inside(root, rows_rel, label), f"{label}/{rows_rel}")
        metrics = _read_json(_inside(root, metrics_rel, label), f"{label}/{metrics_rel}", "metrics_summary")
    return BundleFiles(label, manifest, run, rows, metrics["metrics"])


def case_families(
    bundle: BundleFiles, registry: Registry, pack_root: Path | None
) -> tuple[Mapping[str, Mapping[str, Any]], str]:
    """The case documents of the bundle's exact pack (installed, or ``pack_root``), and where they came from."""
    identity = bundle.pack
    if pack_root is not None:
        pack, where = Pack.from_directory(pack_root), f"pack directory {pack_root}"
    else:
        installed: Pack | None = registry.get("packs", identity.get("name"))
        if installed is None:
            return {}, f"unknown: pack {identity.get('name')} is not installed (install it or pass --pack DIR)"
        pack, where = installed, f"installed pack {identity.get('name')}"
    try:
        manifest = pack.parts.members
    except AssayError as exc:
        return {}, f"unknown: {where} cannot be read ({exc})"
    # Families of another version of the pack could silently regroup the rows.
    if manifest.get("version") != identity.get("version") or manifest.get("digest") != identity.get("digest"):
        return (
            {},
            f"unknown: {where} is {manifest.get('version')} {manifest.get('digest')}, "
            f"not the bundle's {identity.get('version')} {identity.get('digest')}",
        )
    return pack.cases_by_id(), f"{where} {manifest.get('version')}"


def _ident(metric: str, group: Mapping[str, Any]) -> tuple[str, str]:
    return metric, json.dumps(group, sort_keys=True)


def claim_differences(
    claims: Sequence[Mapping[str, Any]], values: Sequence[MetricValue], registered: set[str]
) -> list[str]:
    """Every way the claims differ from the recomputed values, one message each.

    Beyond :func:`assay.summary.compare_claims` (a claimed number that is not
    reproduced), a claimed metric that is not a registered plugin cannot be
    reproduced, and a group of a claimed metric that the rows give but the
    claims leave out would let a bundle hide its worst numbers. A metric not
    claimed at all is not a difference: the bundle may predate that plugin.
    """
    known = [claim for claim in claims if claim.get("metric") in registered]
    problems = [mismatch.message for mismatch in compare_claims(known, values)]
    problems += [
        f"{claim.get('metric')} is claimed but is not a registered metric plugin, so it cannot be recomputed"
        for claim in claims
        if claim.get("metric") not in registered
    ]
    claimed_metrics = {claim["metric"] for claim in known}
    claimed_groups = {_ident(claim["metric"], claim["group"]) for claim in known}
    problems += [
        f"{value.metric} {dict(value.group)} is recomputed from the rows ({value.value!r}) but not claimed"
        for value in values
        if value.metric in claimed_metrics and _ident(value.metric, value.group) not in claimed_groups
    ]
    return problems


def recompute(bundle: BundleFiles, registry: Registry, *, pack_root: Path | None = None) -> ReportData:
    """Recompute every registered metric from the bundle's rows and compare with its claims.

    Case families come from the pack's manifest entries when the pack (the
    installed one, or ``pack_root``) has the bundle's exact version and
    digest; otherwise every case's family is ``unknown``.
    """
    cases, families = case_families(bundle, registry, pack_root)
    context = MetricContext(plan=bundle.run["plan"], cases=cases)
    metrics = registry.items("metrics")
    # Every metric in one walk of the rows; a plugin failing on odd rows is a finding about the bundle, not a crash.
    try:
        summary = SummaryPass(context, registry, list(metrics))
        for row in bundle.rows:
            summary.add(row)
        values = summary.values()
    except MetricFailure as failure:
        error = failure.__cause__
        raise AssayError(
            f"{bundle.label}: metric {failure.metric} cannot be recomputed: {type(error).__name__}: {error}"
        ) from error
    differences = claim_differences(bundle.claims, values, set(metrics))
    sections = registry.items("report_sections")
    kinds = KindsOfCases(cases, registry)
    return ReportData(
        bundle, tuple(values), metrics, families, tuple(differences), sections, registry.items("outcomes"), cases, kinds
    )


class KindsOfCases(Mapping[str, str]):
    """Each case id to its family's kind (attack, benign, ...), looked up when asked: a pack may hold a million
    cases, and a report or a comparison asks of the cases its rows name."""

    def __init__(self, cases: Mapping[str, Mapping[str, Any]], registry: Registry) -> None:
        self._cases = cases
        self._kinds = {name: family.kind for name, family in registry.items("families").items()}

    def __getitem__(self, case_id: str) -> str:
        return str(self._kinds.get(str(self._cases[case_id].get("family")), "unknown"))

    def __iter__(self) -> Iterator[str]:
        return iter(self._cases)

    def __len__(self) -> int:
        return len(self._cases)


def case_kinds(bundle: BundleFiles, registry: Registry, pack_root: Path | None = None) -> Mapping[str, str]:
    """Each case id of the bundle's exact pack to its kind, through its family (empty when the pack is not at hand)."""
    cases, _ = case_families(bundle, registry, pack_root)
    return KindsOfCases(cases, registry)
