"""A fourth assay design: a caller talks a helpdesk agent into resetting an account.

Everything is registered through assay's hooks and imported from ``assay.api``
only: the case kind, the caller's channel, the conversation stage, the
helpdesk sandbox and its tools, the family, the metric, the report table and
the outcome ``assay compare`` pairs on, and a scripted reference agent.
"""

from __future__ import annotations

from assay.api import CaseKind, Channel, Family, ReportSection, Stage, hookimpl

from .agent import HelpdeskAgentBackend
from .desk import TOOLS, DeskSandbox
from .reporting import COMPROMISED, CompromiseRate, compromise_table
from .stage import NAME, OUTCOME_SCHEMA, ConversationRederiver, ConversationReplayer, run_conversation

KIND = "x-social.conversation"
CALLER = "x-social.caller_turn"


@hookimpl
def register_case_kinds(register) -> None:
    """The conversation case kind."""
    register(CaseKind(KIND, "A caller who adapts to the helpdesk agent's answers, turn by turn."))


@hookimpl
def register_channels(register) -> None:
    """The caller's turns."""
    register(Channel(CALLER, "A line of the caller, one turn of the conversation."))


@hookimpl
def register_stages(register) -> None:
    """The conversation stage."""
    register(
        Stage(
            NAME,
            "An adaptive caller against a helpdesk agent with tools; the case's oracles decide compromise.",
            kinds=(KIND,),
            outcome_schema=OUTCOME_SCHEMA,
            run=run_conversation,
            rederiver=ConversationRederiver,
            replayer=ConversationReplayer,
        )
    )


@hookimpl
def register_backends(register) -> None:
    """The design's scripted reference agent."""
    register(HelpdeskAgentBackend())


@hookimpl
def register_sandboxes(register) -> None:
    """The helpdesk the agent acts on."""
    register(DeskSandbox())


@hookimpl
def register_tools(register) -> None:
    """The helpdesk's tools."""
    for tool in TOOLS:
        register(tool)


@hookimpl
def register_families(register) -> None:
    """The family of the design's cases."""
    register(
        Family("SOCIAL", KIND, "Social engineering", "A caller talks the helpdesk round.", (CALLER,), stages=(NAME,))
    )


@hookimpl
def register_metrics(register) -> None:
    """The compromise rate."""
    register(CompromiseRate())


@hookimpl
def register_report_sections(register) -> None:
    """The compromise table."""
    register(ReportSection("social", "Who was talked round, by endpoint and condition.", compromise_table, order=70))


@hookimpl
def register_outcomes(register) -> None:
    """The outcome assay compare pairs conversations on."""
    register(COMPROMISED)
