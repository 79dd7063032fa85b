"""Who judged: the host's record of a judge, not the judge's description of itself.

A judge plugin is asked to describe itself (:meth:`JudgeInstance.describe`,
:meth:`JudgeInstance.producer`), but a description is a claim: a look-alike
registered under another name could describe itself as a genuine judge, and
its verdicts (from a model, so no validator re-derives them) would pass as that
judge's. So the host wraps every judge instance it builds in a
:class:`HostedJudge`: the run manifest's ``judges`` entry and every verdict's
``produced_by`` carry the name the host selected the judge by, the version and
prompt digest its class declares, the model it asks, and the registration (plugin,
distribution, version, files digest) the host found it in. A validator compares
that record with the judge it has installed (:func:`judge_problems`).
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Mapping
from typing import Any

from .plugins import Registration

__all__ = [
    "HostedJudge",
    "calibration_text",
    "declaration_problem",
    "judge_problems",
    "judge_producer",
    "judge_text",
    "producer_difference",
    "registration_record",
    "template_digest",
]

#: What a judge's own ``describe`` may add to the host's record (the rest is the host's).
_DESCRIBED = ("endpoint", "max_reasks")


def template_digest(template: str) -> str:
    """``sha256:<hex>`` of a judge's prompt template (UTF-8)."""
    return "sha256:" + hashlib.sha256(template.encode("utf-8")).hexdigest()


def declaration_problem(judge: Any) -> str | None:
    """Why a judge's class-level identity is not usable (one line), or None."""
    for member in ("version", "prompt_template", "prompt_sha256"):
        if not isinstance(getattr(judge, member, None), str) or not getattr(judge, member):
            return f"its {member} is not a non-empty string"
    template, digest = judge.prompt_template, judge.prompt_sha256
    if template_digest(template) != digest:
        return f"its prompt_sha256 {digest} is not the digest of its prompt_template ({template_digest(template)})"
    return None


def registration_record(registration: Registration) -> dict[str, Any]:
    """The ``registration`` of a judge entry: plugin, distribution, version and files digest."""
    described = registration.describe()
    return {key: described[key] for key in ("plugin", "distribution", "version", "files_sha256") if key in described}


def judge_producer(judge: Any, name: str, model: str | None) -> dict[str, Any]:
    """The ``produced_by`` of a verdict by ``judge`` selected as ``name``."""
    producer = {
        "kind": "judge",
        "name": name,
        "version": judge.version,
        "prompt_sha256": judge.prompt_sha256,
    }
    return {**producer, "model": model} if model else producer


class HostedJudge:
    """A judge instance as the host records it: the host's name, the class's identity, the registration.

    Every role a design's stages call (``semantic``, ``audit_fallback``, ...)
    is passed through; a verdict it returns with a ``produced_by`` has that
    replaced by the host's :meth:`producer`.
    """

    def __init__(self, inner: Any, registration: Registration) -> None:
        self.inner = inner
        self.registration = registration
        self.name = registration.name
        model = getattr(inner, "model", None)
        self.model = model if isinstance(model, str) and model else None
        # A judge that calls a model keeps it here; the engine closes it when the run ends.
        self.endpoint = getattr(inner, "endpoint", None)

    def describe(self, stage: str) -> dict[str, Any]:
        """The run manifest's ``judges`` entry for one judged stage."""
        own = self.inner.describe(stage)
        own = own if isinstance(own, Mapping) else {}
        judge = self.registration.component
        entry: dict[str, Any] = {
            "name": self.name,
            "stage": stage,
            "version": judge.version,
            "prompt_sha256": judge.prompt_sha256,
            **{key: own[key] for key in _DESCRIBED if key in own},
        }
        if self.model:
            entry["model"] = self.model
        calibration = getattr(judge, "calibration", None)
        if calibration:
            entry["calibration"] = [dict(line) for line in calibration]
        entry["registration"] = registration_record(self.registration)
        return entry

    def producer(self) -> dict[str, Any]:
        """The ``produced_by`` of every verdict this judge gives."""
        return judge_producer(self.registration.component, self.name, self.model)

    def __getattr__(self, role: str) -> Any:
        member = getattr(self.inner, role)
        if not inspect.iscoroutinefunction(member):
            return member

        async def stamped(*args: Any, **kwargs: Any) -> Any:
            result = await member(*args, **kwargs)
            if isinstance(result, dict) and "produced_by" in result:
                result = {**result, "produced_by": self.producer()}
            return result

        return stamped


def judge_problems(entry: Mapping[str, Any], installed: Registration | None) -> list[tuple[str, str]]:
    """(pointer suffix, message) for each way a run manifest's judge entry differs from the judge installed here.

    ``installed`` is this machine's registration of the entry's name (None: the
    caller reports an unknown judge). The message names what to install.
    """
    if installed is None:
        return []
    judge = installed.component
    here = registration_record(installed)
    want = f"{here.get('distribution') or here.get('plugin')} {here.get('version') or ''}".strip()
    problems: list[tuple[str, str]] = []
    recorded = entry.get("registration")
    if isinstance(recorded, Mapping):
        if recorded.get("plugin") != installed.plugin and recorded.get("plugin") not in installed.former_plugins:
            problems.append(("/registration/plugin", _other(entry, recorded, here)))
        elif recorded.get("distribution") != installed.distribution:
            problems.append(("/registration/distribution", _other(entry, recorded, here)))
    declared = [dict(line) for line in getattr(judge, "calibration", None) or ()]
    if "calibration" in entry and entry["calibration"] != declared:
        problems.append(
            (
                "/calibration",
                f"judge {entry.get('name')!r} recorded a calibration the installed judge ({want}) does not declare: "
                "a judge's agreement with hand labels is its own class's to say, measured on the calibration sets",
            )
        )
    for member in ("version", "prompt_sha256"):
        if entry.get(member) != getattr(judge, member):
            problems.append(
                (
                    f"/{member}",
                    f"judge {entry.get('name')!r} recorded {member} {entry.get(member)!r}; the installed judge "
                    f"({want}) is {getattr(judge, member)!r}: install the judge that made the run",
                )
            )
    return problems


def producer_difference(producer: Mapping[str, Any], entry: Mapping[str, Any] | None) -> str | None:
    """The first ``produced_by`` field of a judge's verdict that differs from the manifest's judge ``entry`` of
    its stage (None when they agree).

    Name and version must be the entry's; a prompt digest or model the verdict
    carries must be the entry's too, and a verdict must carry the model the
    entry names (bundles written before 1.4 carried neither).
    """
    if entry is None:
        return "name"
    for member in ("name", "version"):
        if producer.get(member) != entry.get(member):
            return member
    if "prompt_sha256" in producer and producer["prompt_sha256"] != entry.get("prompt_sha256"):
        return "prompt_sha256"
    if ("model" in producer or "model" in entry) and producer.get("model") != entry.get("model"):
        return "model"
    return None


def calibration_text(entry: Mapping[str, Any]) -> str | None:
    """One line of a judge entry's held-out calibration (``kappa 0.689 held-out, n 192, safeclaw 1.1.0``), or
    None when it declares none."""
    lines = [line for line in entry.get("calibration") or [] if isinstance(line, Mapping)]
    shown = [line for line in lines if line.get("half") == "heldout"] or lines
    if not shown:
        return None
    return "; ".join(
        f"kappa {line.get('kappa')} on {line.get('half')} (n {line.get('n')}, "
        f"{' '.join(str(line.get('set', '')).split()[:2])})"
        for line in shown
    )


def judge_text(entry: Mapping[str, Any]) -> str:
    """One line naming a manifest judge entry for readers: stage, name, version, model, distribution, prompt digest."""
    found = entry.get("registration")
    registration: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    parts = [f"{entry.get('stage')}: {entry.get('name')} {entry.get('version') or ''}".rstrip()]
    if entry.get("model"):
        parts.append(f"model {entry['model']}")
    if registration.get("distribution"):
        parts.append(f"from {registration['distribution']} {registration.get('version') or ''}".rstrip())
    digest = entry.get("prompt_sha256")
    if isinstance(digest, str):
        parts.append(f"prompt {digest[:19]}")
    calibration = calibration_text(entry)
    if calibration:
        parts.append(f"calibration {calibration}")
    return ", ".join(parts)


def _other(entry: Mapping[str, Any], recorded: Mapping[str, Any], here: Mapping[str, Any]) -> str:
    return (
        f"judge {entry.get('name')!r} was plugin {recorded.get('plugin')} from {recorded.get('distribution')} "
        f"{recorded.get('version')}; the installed one is {here.get('plugin')} from {here.get('distribution')}: "
        f"another judge under the same name (install {recorded.get('distribution') or recorded.get('plugin')} "
        f"{recorded.get('version') or ''} to validate it)"
    )
