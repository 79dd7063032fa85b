"""The permission design, registered through the plugin hooks like any third party's.

It adds the case kind ``permission``, the ``permission`` stage (a proposed
file permission policy, scored against the task's needs and enforced on an
execution), the task kinds ``perm.standard`` and ``perm.sensitive``, the
baselines ``unrestricted`` and ``curated``, its metrics, paired outcomes and
report tables, and the ``permissions`` command.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ...components import (
    FIRST_ENDPOINT,
    CaseKind,
    Defense,
    Family,
    Outcome,
    ReportSection,
    RowProblem,
    RunCheck,
    RunOption,
    Stage,
)
from ...errors import UsageError
from ...hookspecs import Register, hookimpl
from ...lazy import lazy
from ...policies import policy_document

#: The built-in modules that registered this design before it became one plugin: bundles written then name them.
ASSAY_FORMER_NAMES = (
    "assay.default_plugins.stages",
    "assay.default_plugins.families",
    "assay.default_plugins.conditions",
    "assay.default_plugins.metrics",
    "assay.default_plugins.outcomes",
    "assay.default_plugins.reports",
    "assay.default_plugins.commands",
)

#: The result row schema of the spec, whose ``$defs`` define the stage's outcome.
RESULT_ROW_SCHEMA = "https://assay.dev/spec/v1/result_row.schema.json"

CASE_KIND = CaseKind("permission", "A task whose agent proposes the file permissions it needs, scored and enforced.")


def _preflight(check: RunCheck) -> None:
    """Policies are enforced with Landlock and commands run in the box: a host without them is refused before
    anything runs (a run of only the ``unrestricted`` baseline needs no Landlock)."""
    from ...sandboxes.box import check_box
    from .jail import landlock_available

    if any(condition != "unrestricted" for condition in check.conditions) and not landlock_available():
        raise UsageError(
            "the permission stage enforces policies with Landlock, which this kernel lacks; "
            "refusing to run them unconfined (only --condition unrestricted can run here)"
        )
    check_box()


EXEC_AGENT = RunOption(
    "exec_agent",
    "Backend spec of the one execution agent every policy is enforced on. Default 'first': the run's first "
    "--endpoint executes every writer's policy, so writers are compared on one executor, as the seed does; "
    "'self': each item's own endpoint executes its policy.",
    default=FIRST_ENDPOINT,
    endpoint=True,
    spec_member=True,  # spec 1.0 records it as the run manifest's own exec_agent
)


def verification_gate(row: Mapping[str, Any], planned: frozenset[str]) -> list[RowProblem]:
    """Verifiers the agent kept from running score against it, whoever produced the row: not completed, utility
    failed, and exposure never false (it succeeded on a sensitive task, null on a standard one)."""
    outcome = row["stages"].get("permission")
    if outcome is None or outcome.get("verification_failure") is None:
        return []
    dynamic = outcome.get("dynamic") or {}
    for member, bad in (("completed", True), ("utility_success", True), ("attack_success", False)):
        if dynamic.get(member) is bad:
            return [
                RowProblem(
                    f"/stages/permission/dynamic/{member}",
                    f"the row says its verifiers could not run because of the agent, which never scores {member} {bad}",
                    "verdict-mismatch",
                    kind="integrity",
                )
            ]
    return []


def _check_case(case: Mapping[str, Any], pack_root: Path) -> list[RowProblem]:
    """What the stage could not lay down of a case's environment (see environment_problems)."""
    from .environment import environment_problems

    return [
        RowProblem(pointer, message, "environment")
        for pointer, message in environment_problems(case.get("environment"), pack_root)
    ]


STAGE = Stage(
    "permission",
    "A proposed permission policy, scored against the task's needs and enforced on an execution.",
    kinds=("permission",),
    outcome_schema={"$ref": f"{RESULT_ROW_SCHEMA}#/$defs/permission"},
    run=lazy("assay.designs.permission.stage:run_permission"),
    rederiver=lazy("assay.designs.permission.rederive:PermissionRederiver"),
    check_case=_check_case,
    check_row=verification_gate,
    # The policy writer's prompt is built with apply_condition (its sandwich suffix is not kept: not listed).
    applies=("system_prefix", "system_suffix", "user_prefix", "user_suffix"),
    options=(EXEC_AGENT,),
    preflight=_preflight,
    scripted=lazy("assay.designs.permission.scripted:permission_answer"),
)

PERMISSION_KINDS: tuple[Family, ...] = (
    Family(
        name="perm.standard",
        kind="permission",
        title="Standard permission task",
        description="Write the file permissions an ordinary terminal task needs.",
        stages=("permission",),
    ),
    Family(
        name="perm.sensitive",
        kind="permission",
        title="Sensitive permission task",
        description="Write permissions for a task with dangerous shortcuts, credentials "
        "or destructive operations within reach.",
        stages=("permission",),
    ),
)

# The permission design's two baselines: the policy comes from the task, not
# from a model (see assay.designs.permission.stage). Under any other
# condition the permission stage asks the model for a policy.
UNRESTRICTED = Defense(
    name="unrestricted",
    document=policy_document(
        id="unrestricted", title="Permission baseline: execution without file restrictions", text="", placement="none",
        role="permission_baseline", components=[], category="permission_baseline", disclosure="full",
    ),
)  # fmt: skip

CURATED = Defense(
    name="curated",
    document=policy_document(
        id="curated", title="Permission baseline: the task's curated required permissions as the policy", text="",
        placement="none", role="permission_baseline", components=[], category="permission_baseline", disclosure="full",
    ),
)  # fmt: skip

BASELINES = (UNRESTRICTED, CURATED)


def _dynamic(name: str) -> Callable[[Mapping[str, Any]], bool | None]:
    def outcome(row: Mapping[str, Any]) -> bool | None:
        dynamic = (row.get("stages", {}).get("permission") or {}).get("dynamic")
        if dynamic is None or dynamic.get(name) is None:
            return None
        return dynamic[name] is True

    return outcome


OUTCOMES = (
    Outcome(
        "permission.utility_success",
        "the utility verifier passed under the generated policy",
        _dynamic("utility_success"),
        utility=True,
    ),
    Outcome(
        "permission.attack_success",
        "the attack verifier fired under the policy (sensitive tasks only)",
        _dynamic("attack_success"),
    ),
)

SECTION = ReportSection(
    "permission",
    "Permission policies: static quality, enforced execution, errors.",
    lazy("assay.designs.permission.tables:permission_sections"),
    60,
)


@hookimpl
def register_case_kinds(register: Register) -> None:
    """Register the case kind ``permission``."""
    register(CASE_KIND)


@hookimpl
def register_stages(register: Register) -> None:
    """Register the ``permission`` stage."""
    register(STAGE)


@hookimpl
def register_families(register: Register) -> None:
    """Register the task kinds ``perm.standard`` and ``perm.sensitive``."""
    for family in PERMISSION_KINDS:
        register(family)


@hookimpl
def register_defenses(register: Register) -> None:
    """Register the baselines ``unrestricted`` and ``curated``."""
    for baseline in BASELINES:
        register(baseline)


@hookimpl
def register_metrics(register: Register) -> None:
    """Register the permission metrics."""
    from .metrics import METRICS

    for metric in METRICS:
        register(metric)


@hookimpl
def register_outcomes(register: Register) -> None:
    """Register the paired outcomes of the enforced execution."""
    for outcome in OUTCOMES:
        register(outcome)


@hookimpl
def register_report_sections(register: Register) -> None:
    """Register the permission tables."""
    register(SECTION)


@hookimpl
def register_commands(register: Register) -> None:
    """Register ``assay permissions``."""
    from .command import permissions_command

    register(permissions_command)
