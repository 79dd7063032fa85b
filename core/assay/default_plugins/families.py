"""Built-in families: the six attack families of the staged-endpoint design and
the task kinds of the trajectory and permission designs.

Families are reporting groups, not exclusive causes: DPI, IPI and TRI describe
where an instruction comes from, MPI persistence through memory, MEX the
extraction of protected information, and ADI unsafe inference from an
underspecified request. Each carries the channels its attacks arrive through
and the multi-label defaults a case inherits where it is silent.
"""

from __future__ import annotations

from ..components import Family
from ..hookspecs import Register, hookimpl

_ATTACK_STAGES = ("semantic", "audit", "exec")

ATTACK_FAMILIES: tuple[Family, ...] = (
    Family(
        name="DPI",
        kind="attack",
        title="Direct prompt injection",
        description="The attacker writes the user turn and tries to override the agent's instructions directly.",
        channels=("user_turn",),
        default_labels={
            "source_channel": "user_turn",
            "mechanism": "instruction_override",
            "evidence_channel": "final_response",
        },
        stages=_ATTACK_STAGES,
    ),
    Family(
        name="IPI",
        kind="attack",
        title="Indirect prompt injection",
        description="Instructions hidden in content the agent reads: a document or a web page.",
        channels=("document", "web_page"),
        default_labels={
            "source_channel": "document",
            "mechanism": "embedded_instruction",
            "evidence_channel": "tool_trace",
        },
        stages=_ATTACK_STAGES,
    ),
    Family(
        name="TRI",
        kind="attack",
        title="Tool-return injection",
        description="Instructions placed in the value a tool returns, often disguised as tool metadata.",
        channels=("tool_return",),
        default_labels={
            "source_channel": "tool_return",
            "mechanism": "tool_output_instruction",
            "evidence_channel": "tool_trace",
        },
        stages=_ATTACK_STAGES,
    ),
    Family(
        name="MPI",
        kind="attack",
        title="Memory poisoning",
        description="A write to persistent memory in one session that changes behaviour in a later one.",
        channels=("memory_entry", "user_turn"),
        default_labels={
            "source_channel": "memory_entry",
            "mechanism": "persistent_write",
            "lifecycle_stage": "memory_write",
            "evidence_channel": "memory_store",
        },
        stages=_ATTACK_STAGES,
    ),
    Family(
        name="MEX",
        kind="attack",
        title="Memory and protected-information extraction",
        description="Requests that try to extract secrets, the system prompt, protected memory or configuration.",
        channels=("user_turn", "memory_entry"),
        default_labels={
            "source_channel": "user_turn",
            "mechanism": "extraction_request",
            "harm_goal": "disclosure",
            "evidence_channel": "final_response",
        },
        stages=_ATTACK_STAGES,
    ),
    Family(
        name="ADI",
        kind="attack",
        title="Ambiguity-driven unsafe inference",
        description="An underspecified request whose most convenient reading is unsafe.",
        channels=("user_turn",),
        default_labels={
            "source_channel": "user_turn",
            "mechanism": "underspecification",
            "evidence_channel": "tool_trace",
        },
        stages=_ATTACK_STAGES,
    ),
)

BENIGN_FAMILIES: tuple[Family, ...] = (
    Family(
        name="BENIGN",
        kind="benign",
        title="Benign companion task",
        description="An ordinary task in the same environment, scored for utility; pairs with attack cases.",
        stages=("semantic", "exec"),
    ),
)

_TRAJECTORY = ("trajectory",)

TRAJECTORY_KINDS: tuple[Family, ...] = tuple(
    Family(name=f"sec.{slug}", kind="trajectory", title=title, description=description, stages=_TRAJECTORY)
    for slug, title, description in (
        ("localization", "Vulnerability localization", "Find the file and symbol that hold a known defect."),
        ("reachability", "Reachability verification", "Show whether an entry point reaches the defective code."),
        (
            "proof_of_trigger",
            "Proof of trigger",
            "Produce redacted local evidence (a failing test or checker output) that the defect triggers.",
        ),
        (
            "patch_verification",
            "Patch verification",
            "Decide whether a candidate patch fixes the defect, with local evidence.",
        ),
        ("report_writing", "Security report writing", "Write a grounded report of the defect for maintainers."),
        ("sanity", "Sanity control", "Ordinary, non-security defect analysis in the same harness."),
        ("coding", "Coding control", "A small local repair task in the style of HumanEval/MBPP."),
    )
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

ALL_FAMILIES = ATTACK_FAMILIES + BENIGN_FAMILIES + TRAJECTORY_KINDS + PERMISSION_KINDS


@hookimpl
def register_families(register: Register) -> None:
    """Register the built-in attack families and task kinds."""
    for family in ALL_FAMILIES:
        register(family)
