"""Condition policies: a policy document, and how one is placed in the messages an agent sees.

A condition (a defense, a prompt framing, a baseline) is a policy document:
its ``text`` goes where its ``placement`` says, and a ``hash_only`` one is
recorded by category and digest, never by wording (:func:`withhold`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import UsageError
from .hashing import digest_document
from .schemas import CURRENT_SPEC_VERSION

__all__ = ["apply_condition", "apply_defense", "policy_document", "withheld_marker", "withhold"]


def policy_document(**fields: Any) -> dict[str, Any]:
    """A defense policy document with its digest filled in.

    ``spec_version`` defaults to the engine's; a document that uses a later minor version's members (an extension
    placement, spec 1.2) says so. The digest covers it, so a condition keeps its digest across engine releases.
    """
    document = {"spec_version": CURRENT_SPEC_VERSION, **fields}
    document["digest"] = digest_document(document)
    return document


def apply_defense(
    system: str, messages: list[dict[str, Any]], policy: Mapping[str, Any]
) -> tuple[str, list[dict[str, Any]]]:
    """Place a defense policy's text as its ``placement`` says.

    A plugin's placement (an extension name, spec 1.2) is that plugin's stages' to place: placing it here would
    run the condition as if it were absent, so it is refused.
    """
    from .extensions import is_extension_name

    placement, text = policy.get("placement", "none"), policy.get("text", "")
    if is_extension_name(placement):
        raise UsageError(
            f"condition {policy.get('id')!r} is placed by the stages of its plugin ({placement}), not in the prompt"
        )
    if placement == "system_prefix":
        system = f"{text}\n\n{system}"
    elif placement == "system_suffix":
        system = f"{system}\n\n{text}"
    elif placement == "sandwich":
        # The closing half goes after the user's content, inside the last user
        # turn: many chat templates (Gemma's among them) allow a system message
        # only at the start.
        system = f"{text}\n\n{system}"
        messages = [*messages, {"role": "user", "content": policy.get("suffix_text", "")}]
    elif placement in ("user_prefix", "user_suffix"):
        # Prompt conditions frame the task itself: the first user turn.
        messages = [dict(m) for m in messages]
        first = next((m for m in messages if m["role"] == "user"), None)
        if first is not None:
            content = first.get("content") or ""
            first["content"] = f"{text}\n\n{content}" if placement == "user_prefix" else f"{content}\n\n{text}"
    return system, _alternate(messages)


def apply_condition(
    system: str, messages: list[dict[str, Any]], policy: Mapping[str, Any]
) -> tuple[str, list[dict[str, Any]]]:
    """Place the run's condition (``context.policy``) in a stage's prompt: its text where its ``placement`` says.

    Returns the system prompt and the turns to send. A stage that builds its
    prompts with this lists the placements in its ``Stage.applies`` (the five
    prompt placements, or those it keeps); the engine then checks that what
    the stage sent carries the condition's text.
    """
    return apply_defense(system, messages, policy)


def withheld_marker(policy: Mapping[str, Any]) -> str:
    """The marker that stands in for a hash-only condition's text in every recorded document."""
    return f"[{policy.get('category', 'condition')} template withheld: sha256 {policy.get('text_sha256', '')}]"


def withhold(value: Any, policy: Mapping[str, Any]) -> Any:
    """``value`` with a ``hash_only`` condition's text replaced by its marker in every string (others unchanged)."""
    text = policy.get("text") or ""
    if policy.get("disclosure") != "hash_only" or not text:
        return value
    marker = withheld_marker(policy)
    if isinstance(value, str):
        return value.replace(text, marker)
    if isinstance(value, list):
        return [withhold(v, policy) for v in value]
    if isinstance(value, dict):
        return {k: withhold(v, policy) for k, v in value.items()}
    return value


def _alternate(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Merge consecutive turns of the same role: chat templates require user/assistant alternation."""
    merged: list[dict[str, Any]] = []
    for turn in turns:
        if merged and merged[-1]["role"] == turn["role"] and turn["role"] in ("user", "assistant"):
            merged[-1] = {**merged[-1], "content": f"{merged[-1].get('content') or ''}\n\n{turn.get('content') or ''}"}
        else:
            merged.append(dict(turn))
    return merged
