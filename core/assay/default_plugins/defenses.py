"""Built-in defense policies. D0 is the baseline: the agent prompt with tool
descriptions and no added defense text."""

from __future__ import annotations

from ..components import Defense
from ..hashing import digest_document
from ..hookspecs import hookimpl
from ..schemas import CURRENT_SPEC_VERSION


def policy_document(**fields) -> dict:
    """A defense policy document with its digest filled in."""
    document = {"spec_version": CURRENT_SPEC_VERSION, **fields}
    document["digest"] = digest_document(document)
    return document


D0 = Defense(
    name="D0",
    document=policy_document(
        id="D0",
        title="No defense policy",
        text="",
        placement="none",
        role="no_defense",
        components=[],
    ),
)


@hookimpl
def register_defenses(register) -> None:
    """Register D0, the no-defense condition."""
    register(D0)
