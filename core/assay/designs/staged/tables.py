"""The staged-endpoint design's main tables, assembled from the recomputed metric values.

Each table is shown only when the bundle's rows carry the stages it needs:

* CoreFail@N by endpoint x defense, with a pooled row per defense (semantic);
* the audit accounting per endpoint at D0 and per defense, with the closure
  check (audit);
* ObservedHarm@Exec, StateChange-ASR and ToolCall-ASR by endpoint x defense,
  with pooled rows (exec);
* the core-exec join per endpoint x defense and pooled (semantic and exec);
* McNemar of each defense against D0, Holm-adjusted (D0 plus another defense);
* the permission tables (:mod:`assay.designs.permission.tables`).

Nothing here computes from rows: every number is a metric value (or a sum of
the counts of several), so the tables agree with the per-metric sections below
them. Endpoints and conditions follow the run plan's order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ...components import MetricValue
from ...reports.model import (
    MainSection,
    MetricSection,
    Table,
    endpoint_label,
    format_number,
    group_cells,
    metric_table,
    rate_points,
)
from ...reports.panel import ReportPanel
from ...stats import rate
from .metrics import AUDIT_OUTCOMES, BASELINE_CONDITION, EVIDENCE_FLAGS

__all__ = ["audit_section", "core_exec_join_section", "core_fail_section", "exec_section", "mcnemar_section"]

_FLAG_NAMES = dict(zip(EVIDENCE_FLAGS, ("TextHarm", "AccessHarm", "ActionHarm", "PersistHarm"), strict=True))
#: Outcomes shown only when some row of the table has them (the design omits all-zero NotObservable).
_OPTIONAL_OUTCOMES = ("NotObservable", "OtherNoHarm")
_JOIN_CELLS = ("CoreFail_ExecHarm", "CoreFail_NoExecHarm", "CorePass_ExecHarm", "CorePass_NoExecHarm")
_EXEC_TABLES = (
    ("exec.observed_harm_rate", "exec.observed_harm_rate_pooled", "ObservedHarm@Exec"),
    ("exec.state_change_asr", None, "StateChange-ASR"),
    ("exec.tool_call_asr", None, "ToolCall-ASR"),
)
_MCNEMAR = (("semantic.mcnemar_vs_d0", "CoreFail"), ("exec.mcnemar_vs_d0", "ObservedHarm@Exec"))


def _share(k: int, n: int) -> str:
    share = rate(k, n)
    return "n/a" if share is None else f"{100 * share:.1f}%"


def _rate_text(value: Any) -> str:
    return "n/a" if not isinstance(value, (int, float)) else f"{100 * value:.1f}%"


def core_fail_section(panel: ReportPanel) -> MainSection | None:
    """CoreFail@N by endpoint x defense, pooled per defense (semantic rows)."""
    if "semantic" not in panel.stages or not panel.cells("semantic.core_fail_rate"):
        return None
    table = panel.matrix(
        "semantic.core_fail_rate",
        "semantic.core_fail_rate_pooled",
        "CoreFail@N per cell: percent [95% Wilson interval] (k/n)",
    )
    notes = (
        "The last row pools every endpoint's rows of a defense; its interval is descriptive, not a paired test "
        "(see the McNemar table). A null judge verdict counts as not failed.",
    )
    return MainSection(
        "core-fail",
        "CoreFail@N by endpoint and defense",
        "Share of attack rows whose final response complied with the attack goal, per endpoint (rows) and defense "
        "(columns); the benign companions are apart (their utility is under Exec).",
        (table,),
        notes,
        "lines",
        panel.points("semantic.core_fail_rate"),
    )


def _outcome_columns(details: Iterable[Mapping[str, Any]]) -> list[str]:
    details = list(details)
    return [o for o in _OPTIONAL_OUTCOMES if any(d.get(o, 0) for d in details)]


def _check(details: Iterable[Mapping[str, Any]]) -> str:
    return "closes" if all(d.get("closes") is True for d in details) else "OPEN"


def _total(details: Sequence[Mapping[str, Any]], key: str) -> int:
    return sum(int(d.get(key, 0)) for d in details)


def audit_section(panel: ReportPanel) -> MainSection | None:
    """The audit accounting per endpoint at D0 and per defense, with the closure check (audit rows)."""
    accounting = panel.cells("audit.accounting")
    if "audit" not in panel.stages or not accounting:
        return None
    tables = []
    baseline = [
        (e, accounting[e, BASELINE_CONDITION]) for e in panel.endpoints if (e, BASELINE_CONDITION) in accounting
    ]
    if baseline:
        core = panel.cells("semantic.core_fail_rate")
        details = [v.detail or {} for _, v in baseline]
        extra = _outcome_columns(details)
        counts = ("core_fail", "audited", *EVIDENCE_FLAGS, "HarmEvidence", "SemanticOnly", "NullAudit", *extra)
        columns = (
            "endpoint",
            "CoreFail",
            "CoreFail@N",
            "AuditRows",
            *(_FLAG_NAMES[f] for f in EVIDENCE_FLAGS),
            "HarmEvidence",
            "SemanticOnly",
            "NullAudit",
            *extra,
            "Check",
        )

        def row(name: str, group: Sequence[Mapping[str, Any]], core_rate: MetricValue | None) -> tuple[str, ...]:
            share = "" if core_rate is None else _share(core_rate.numerator or 0, core_rate.denominator or 0)
            cells = [str(_total(group, k)) for k in counts]
            return (name, cells[0], share, *cells[1:], _check(group))

        rows = [row(panel.label(e), [v.detail or {}], core.get((e, BASELINE_CONDITION))) for e, v in baseline]
        rows.append(
            row(
                f"all ({len(baseline)} endpoints)",
                details,
                panel.pooled("semantic.core_fail_rate", "semantic.core_fail_rate_pooled", BASELINE_CONDITION),
            )
        )
        caption = f"Audit accounting per endpoint at {BASELINE_CONDITION}"
        tables.append(Table(columns, tuple(rows), caption=caption, numeric_from=1))

    per_condition = [
        (c, [accounting[e, c].detail or {} for e in panel.endpoints if (e, c) in accounting]) for c in panel.conditions
    ]
    per_condition = [(c, details) for c, details in per_condition if details]
    every = [d for _, details in per_condition for d in details]
    extra = [o for o in ("NotObservable",) if any(d.get(o, 0) for d in every)]
    counts = ("core_fail", "audited", "missing", "HarmEvidence", "SemanticOnly", "NullAudit", "OtherNoHarm", *extra)
    columns = (
        "defense",
        "CoreFail",
        "Audited",
        "Missing",
        "HarmEvidence",
        "SemanticOnly",
        "NullAudit",
        "OtherNoHarm",
        *extra,
        "Check",
    )
    rows = [(str(c), *(str(_total(details, k)) for k in counts), _check(details)) for c, details in per_condition]
    rows.append((f"all ({len(per_condition)} defenses)", *(str(_total(every, k)) for k in counts), _check(every)))
    tables.append(
        Table(columns, tuple(rows), caption="Audit accounting per defense (every endpoint pooled)", numeric_from=1)
    )
    notes = (
        "AuditRows (Audited) are the CoreFail rows the audit selected; Missing counts CoreFail rows without an audit. "
        "Check says closes when, in every endpoint's accounting the row covers, Audited = HarmEvidence + SemanticOnly "
        "+ NotObservable + NullAudit + OtherNoHarm and nothing is missing; otherwise OPEN. "
        "The four evidence columns count "
        "rows with each flag and may overlap within HarmEvidence; NotObservable and OtherNoHarm are shown only when "
        "some row has them.",
    )
    return MainSection(
        "audit",
        "Core-gated harm-evidence audit accounting",
        "The audit of exactly the CoreFail rows: outcomes, evidence flags and whether the accounting closes.",
        tuple(tables),
        notes,
    )


def exec_section(panel: ReportPanel) -> MainSection | None:
    """ObservedHarm@Exec, StateChange-ASR and ToolCall-ASR by endpoint x defense, pooled (exec rows)."""
    if "exec" not in panel.stages:
        return None
    tables = [
        panel.matrix(metric, pooled, f"{title} per cell: percent [95% Wilson interval] (k/n)")
        for metric, pooled, title in _EXEC_TABLES
        if panel.cells(metric)
    ]
    if panel.cells("exec.benign_utility"):  # the companions measure utility, on their own
        tables.append(
            panel.matrix(
                "exec.benign_utility", None, "Benign utility (companion tasks) per cell: percent [95% Wilson] (k/n)"
            )
        )
    if not tables:
        return None
    notes = (
        "Exec is a separate agent loop in an isolated sandbox; its rates are decided by deterministic oracles "
        "on the state diff. The harm rates are over the attack cases; the benign companions measure utility and "
        "are reported on their own. The last row of each table pools every endpoint's rows of a defense.",
    )
    return MainSection(
        "exec",
        "Exec outcomes by endpoint and defense",
        "ObservedHarm@Exec (a harm oracle fired), StateChange-ASR and ToolCall-ASR "
        "per endpoint (rows) and defense (columns).",
        tuple(tables),
        notes,
        "spread",
        panel.points("exec.observed_harm_rate"),
    )


def _join_row(name: str, condition: str, details: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    counts = [_total(details, cell) for cell in _JOIN_CELLS]
    harm = counts[0] + counts[2]
    return (name, condition, *map(str, counts), str(sum(counts)), f"{_share(counts[2], harm)} ({counts[2]}/{harm})")


def core_exec_join_section(panel: ReportPanel) -> MainSection | None:
    """The core-exec join per endpoint x defense and pooled (semantic and exec rows)."""
    cells = panel.cells("exec.core_exec_join")
    if not {"semantic", "exec"} <= panel.stages or not cells:
        return None
    rows = []
    for endpoint in panel.endpoints:
        rows += [
            _join_row(panel.label(endpoint), str(c), [cells[endpoint, c].detail or {}])
            for c in panel.conditions
            if (endpoint, c) in cells
        ]
    every = []
    for condition in panel.conditions:
        details = [cells[e, condition].detail or {} for e in panel.endpoints if (e, condition) in cells]
        if details:
            rows.append(_join_row("pooled", str(condition), details))
            every += details
    rows.append(_join_row("pooled", "all", every))
    columns = (
        "endpoint",
        "defense",
        "CoreFail∧ExecHarm",
        "CoreFail only",
        "CorePass∧ExecHarm",
        "neither",
        "matched",
        "CorePass share of ExecHarm",
    )
    notes = (
        "Matched work items (case, endpoint, defense, seed, epoch) with both a semantic verdict and an exec outcome. "
        "CoreFail only = CoreFail without ExecHarm; neither = CorePass without ExecHarm.",
    )
    return MainSection(
        "core-exec-join",
        "Core-exec join",
        "Semantic CoreFail against sandbox ExecHarm on the same work items, per endpoint and defense, then pooled.",
        (Table(columns, tuple(rows), numeric_from=2),),
        notes,
    )


def mcnemar_section(panel: ReportPanel) -> MainSection | None:
    """McNemar of each defense against D0, Holm-adjusted (D0 plus another defense)."""
    rows = []
    for metric, outcome in _MCNEMAR:
        tests = panel.by_condition(metric)
        for condition in panel.conditions:
            value = tests.get(condition)
            if value is None:
                continue
            d = value.detail or {}
            rows.append((
                outcome,
                str(condition),
                str(d.get("n_pairs")),
                _rate_text(d.get("rate_d0")),
                _rate_text(d.get("rate_condition")),
                str(d.get("b")),
                str(d.get("c")),
                f"{d.get('p_raw', float('nan')):.4g}",
                "n/a" if value.value is None else f"{value.value:.4g}",
            ))  # fmt: skip
    if not rows:
        return None
    columns = (
        "outcome",
        "defense",
        "pairs",
        f"rate {BASELINE_CONDITION}",
        "rate defense",
        f"b ({BASELINE_CONDITION} only)",
        "c (defense only)",
        "McNemar p",
        "Holm p",
    )
    notes = (
        f"Each row of a defense is paired with the {BASELINE_CONDITION} row of the same case, endpoint, seed, epoch "
        f"and protocol, pooling every endpoint. b counts pairs where the outcome holds under {BASELINE_CONDITION} only "
        "(the defense helped), c under the defense only. Exact McNemar; Holm-adjusted across the defenses of one "
        "outcome. A null semantic verdict counts as not failed.",
    )
    return MainSection(
        "mcnemar",
        f"Paired tests against {BASELINE_CONDITION}",
        f"Did the defense change the outcome on the same work items as {BASELINE_CONDITION}?",
        (Table(columns, tuple(rows), numeric_from=2),),
        notes,
    )


# ---------------------------------------------------------------- metric sections of their own

_JOIN_2X2 = (
    ("CoreFail", "CoreFail_ExecHarm", "CoreFail_NoExecHarm"),
    ("CorePass", "CorePass_ExecHarm", "CorePass_NoExecHarm"),
)


def _audit_table(values: Sequence[MetricValue], scripted: frozenset[str]) -> Table:
    counts = ("core_fail", "audited", "missing", *AUDIT_OUTCOMES, *EVIDENCE_FLAGS)
    names = ("CoreFail", "Audited", "Missing", *AUDIT_OUTCOMES, *EVIDENCE_FLAGS)
    rows = []
    for value in values:
        detail = value.detail or {}
        check = "closes" if detail.get("closes") is True else "DOES NOT CLOSE"
        rows.append(
            (
                *group_cells(value, (), scripted),
                *(format_number(detail.get(k)) for k in counts),
                format_number(value.value),
                check,
            )
        )
    return Table(("endpoint", "condition", *names, "coverage", "Check"), tuple(rows), numeric_from=2)


def _join_tables(values: Sequence[MetricValue], scripted: frozenset[str]) -> list[Table]:
    tables = []
    for value in values:
        detail = value.detail or {}
        rows = []
        for name, harm, no_harm in _JOIN_2X2:
            a, b = int(detail.get(harm, 0)), int(detail.get(no_harm, 0))
            rows.append((name, str(a), str(b), str(a + b)))
        totals = [sum(int(detail.get(cells[i], 0)) for cells in _JOIN_2X2) for i in (1, 2)]
        rows.append(("total", str(totals[0]), str(totals[1]), str(sum(totals))))
        caption = f"{endpoint_label(value.group.get('endpoint'), scripted)} x {value.group.get('condition')}"
        tables.append(Table(("", "ExecHarm", "NoExecHarm", "total"), tuple(rows), caption=caption, numeric_from=1))
    return tables


def audit_accounting_metric_section(
    metric: Any, values: Sequence[MetricValue], scripted: frozenset[str]
) -> MetricSection:
    """``audit.accounting`` as its report shows it: the accounting table, with whether it closes."""
    notes = (
        "Audited = HarmEvidence + SemanticOnly + NotObservable + NullAudit + OtherNoHarm; Check says whether "
        "that sum closes and every CoreFail row was audited (Missing = 0). Coverage = Audited / CoreFail.",
    )
    return MetricSection(metric.name, metric.description, (_audit_table(values, scripted),), notes)


def core_exec_join_metric_section(
    metric: Any, values: Sequence[MetricValue], scripted: frozenset[str]
) -> MetricSection:
    """``exec.core_exec_join`` as its report shows it: the rate, then each group's 2x2 table."""
    notes = (
        "Matched work items (case, endpoint, condition, seed, epoch) with both a semantic verdict "
        "and an exec outcome; value = CorePass share of the ExecHarm items.",
    )
    tables = (metric_table(values, scripted, details=False), *_join_tables(values, scripted))
    return MetricSection(metric.name, metric.description, tables, notes, "rate", rate_points(values, scripted, None))
