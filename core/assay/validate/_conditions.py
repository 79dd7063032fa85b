"""Was the row's condition applied? What a bundle's rows recorded, against the stages that claim to apply it.

A stage declares the placements of a condition it applies (``Stage.applies``).
For a row of a condition that places text in the prompt, the validator asks
two things of what the row recorded:

* the engine's record of what was sent (``prompts_sent``): a stage that
  applies the placement and sent prompts, none carrying the condition's text,
  must have made the row an error row (``condition_not_applied``);
* the recorded conversation: when a stage that applies the placement holds
  an outcome and the row recorded any messages, the condition's text (or, for
  a hash-only condition, its withheld marker) appears in one of them.

Either failing is ``condition-not-applied``: a row that says it was measured
under a condition whose text never reached the model.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ..engine.conditions import applies, condition_text
from ..extensions import is_extension_name
from ..plugins import Registry
from ..policies import withheld_marker

__all__ = ["ConditionCheck"]


class ConditionCheck:
    """The condition check of one bundle's rows (policies and stage declarations looked up once)."""

    def __init__(self, registry: Registry, planned: Sequence[str]) -> None:
        self._registry = registry
        self._stages = {name: stage for name in planned if (stage := registry.get("stages", name)) is not None}
        self._texts: dict[str, tuple[str, frozenset[str]] | None] = {}

    def _condition(self, condition: str) -> tuple[str, frozenset[str]] | None:
        """(the text a row's messages must hold, the planned stages that apply it), or None to check nothing."""
        if condition not in self._texts:
            defense = self._registry.get("defenses", condition)
            policy: Mapping[str, Any] = defense.document if defense is not None else {}
            placement = str(policy.get("placement", "none"))
            text = condition_text(policy)
            if not text or is_extension_name(placement):
                self._texts[condition] = None
            else:
                shown = withheld_marker(policy) if policy.get("disclosure") == "hash_only" else text
                applying = frozenset(name for name, stage in self._stages.items() if applies(stage, placement))
                self._texts[condition] = (shown, applying) if applying else None
        return self._texts[condition]

    def problem(self, row: Mapping[str, Any]) -> tuple[str, str] | None:
        """(pointer, message) when the row says it ran under a condition that its stages did not apply."""
        found = self._condition(str(row["key"]["condition"]))
        if found is None or row.get("errors"):
            return None
        text, applying = found
        stages = [name for name in row["stages"] if name in applying]
        if not stages:
            return None
        sent: dict[str, list[bool]] = {}
        for entry in row.get("prompts_sent") or []:
            if isinstance(entry, Mapping) and entry.get("stage") in applying and "condition_applied" in entry:
                sent.setdefault(str(entry["stage"]), []).append(bool(entry["condition_applied"]))
        for stage, flags in sorted(sent.items()):
            if flags and not any(flags):
                return (
                    "/prompts_sent",
                    f"the {stage} stage sent {len(flags)} prompts, none with condition {row['key']['condition']}'s "
                    "text, and the row is not an error row",
                )
        contents = [str(m.get("content") or "") for m in _messages(row)]
        if contents and not any(text in content for content in contents):
            return (
                "/transcript",
                f"condition {row['key']['condition']} is applied by the {', '.join(stages)} stage, and none of the "
                "row's recorded messages carries its text: the row was not measured under it",
            )
        return None


def _messages(row: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """Every recorded message of a row: its transcript's and each stage outcome's own."""
    transcripts = [row.get("transcript")]
    transcripts += [outcome.get("transcript") for outcome in row["stages"].values() if isinstance(outcome, Mapping)]
    for transcript in transcripts:
        if isinstance(transcript, Mapping):
            for message in transcript.get("messages") or []:
                if isinstance(message, Mapping):
                    yield message
