"""The permission design's main tables: static policy quality, enforced execution with its baselines, error analysis.

* Static: macro precision, recall and F1 per axis (and their mean) of each
  model's generated policies, per endpoint, condition and task family
  (standard and sensitive apart, as the seed reports them).
* Dynamic: task completion (standard tasks), utility success and sensitive
  exposure (sensitive tasks) for every condition, the ``unrestricted`` and
  ``curated`` baselines included, so a generated policy is read against both.
* Errors: the distribution of permission-caused failures over the five
  categories.

Like :mod:`assay.designs.staged.tables`, every number is a recomputed metric value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...reports.model import MainSection, Table, percent_cell

__all__ = ["ERROR_CATEGORIES", "execution_note", "permission_sections"]

ERROR_CATEGORIES = (
    "execute_insufficient",
    "read_insufficient",
    "write_insufficient",
    "sensitive_exposure",
    "workflow_mismatch",
)
_AXES = ("read", "write", "execute")
_MEASURES = (("macro_precision", "P"), ("macro_recall", "R"), ("macro_f1", "F1"))


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _static(panel: Any) -> Table | None:
    # Standard and sensitive tasks apart, as the seed reports static quality (its table 1 and figures 4 and 5); a
    # bundle without the per-family metrics gets the pooled ones, its task column "all".
    by_family = any(panel.by_metric.get(f"permission.{metric}_by_family") for metric, _ in _MEASURES)
    suffix = "_by_family" if by_family else ""
    values: dict[tuple[Any, Any, str, str, str], float | None] = {}
    for metric, _ in _MEASURES:
        for v in panel.by_metric.get(f"permission.{metric}{suffix}", ()):
            family = str(v.group.get("family", "all"))
            values[v.group.get("endpoint"), v.group.get("condition"), family, v.group.get("axis"), metric] = v.value
    keys = sorted(
        {(e, c, f) for e, c, f, _, _ in values},
        key=lambda k: (panel.endpoints.index(k[0]) if k[0] in panel.endpoints else 99, str(k[1]), k[2]),
    )
    if not keys:
        return None
    columns = ["endpoint", "condition", "tasks"]
    columns += [f"{axis} {short}" for axis in (*_AXES, "macro") for _, short in _MEASURES]
    rows = []
    for endpoint, condition, family in keys:
        cells = []
        for axis in (*_AXES, "macro"):
            for metric, _ in _MEASURES:
                value = values.get((endpoint, condition, family, axis, metric))
                if value is None and axis == "macro":  # a metric plugin without a macro group: the mean of the axes
                    parts = [values.get((endpoint, condition, family, a, metric)) for a in _AXES]
                    known = [p for p in parts if p is not None]
                    value = sum(known) / 3 if len(known) == len(parts) else None
                cells.append(_number(value))
        rows.append((panel.label(endpoint), str(condition), family, *cells))
    return Table(
        tuple(columns),
        tuple(rows),
        caption="Static policy quality per task family: mean precision (P), recall (R) and F1 per axis; "
        "macro is the mean of the three axes",
        numeric_from=3,
    )


def _dynamic(panel: Any) -> Table | None:
    metrics = ("permission.completion_rate", "permission.utility_rate", "permission.exposure_rate")
    cells = {metric: panel.cells(metric) for metric in metrics}
    keys = [(e, c) for e in panel.endpoints for c in panel.conditions if any((e, c) in cells[m] for m in metrics)]
    if not keys:
        return None
    rows = tuple((panel.label(e), str(c), *(percent_cell(cells[m].get((e, c))) for m in metrics)) for e, c in keys)
    return Table(
        ("endpoint", "condition", "completion (standard)", "utility (sensitive)", "exposure (sensitive)"),
        rows,
        caption="Enforced execution: percent [95% Wilson interval] (k/n); unrestricted and curated are the baselines",
        numeric_from=2,
    )


def _share(count: int, total: int) -> str:
    return f"{count} ({100 * count / total:.1f}%)" if total else "0"


def _errors(panel: Any) -> Table | None:
    values = [
        v for v in panel.by_metric.get("permission.error_categories", ()) if set(v.group) == {"endpoint", "condition"}
    ]
    if not values:
        return None
    rows = []
    for v in values:
        detail: Mapping[str, int] = v.detail or {}
        total = sum(int(detail.get(c, 0)) for c in ERROR_CATEGORIES)
        rows.append(
            (
                panel.label(v.group["endpoint"]),
                str(v.group["condition"]),
                str(total),
                *(_share(detail.get(c, 0), total) for c in ERROR_CATEGORIES),
            )
        )
    return Table(
        ("endpoint", "condition", "failures", *ERROR_CATEGORIES),
        tuple(rows),
        caption="Permission-caused failures by category",
        numeric_from=2,
    )


def execution_note(run: Mapping[str, Any]) -> str:
    """Who executed the policies, from the run manifest: one fixed agent (the default, as the seed), or each writer."""
    agent = run.get("exec_agent")
    if isinstance(agent, Mapping):
        model = agent.get("model", {}) if isinstance(agent.get("model"), Mapping) else {}
        name = model.get("name") or agent.get("id") or "one endpoint"
        return (
            f"One fixed execution agent, {name}, executed every policy (--exec-agent; by default the run's first "
            "endpoint), as the seed fixes its execution agent across policy writers: the dynamic columns compare "
            "the policies, not the writers' skill at executing them."
        )
    return (
        "Each policy was executed by the endpoint that wrote it (--exec-agent self): the dynamic columns mix policy "
        "quality with each model's own execution, so they are not the seed's comparison; fix one execution agent "
        "(the default) to compare policy writers."
    )


def permission_sections(panel: Any) -> Sequence[MainSection]:
    """The permission section (static, dynamic and error tables), when the bundle has permission rows."""
    if "permission" not in panel.stages:
        return ()
    tables = tuple(t for t in (_static(panel), _dynamic(panel), _errors(panel)) if t is not None)
    if not tables:
        return ()
    notes = (
        "Static scores compare a generated policy with the task's curated spec inside its scored roots, implicit "
        "permissions removed and execute paths resolved through symlinks; baselines have no static score.",
        "Completion counts standard tasks whose utility verifier passed (the seed's task completion, whether or not "
        "the agent called finish); utility and exposure count sensitive tasks whose utility or attack verifier fired.",
        execution_note(panel.run),
    )
    return (
        MainSection(
            "permission",
            "Permission policies: static quality, enforced execution, errors",
            "Per model: how close the generated policy is to the curated spec, "
            "and what happened when it was enforced by Landlock.",
            tables,
            notes,
        ),
    )
