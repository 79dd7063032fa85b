"""What plugins add to the spec (1.1): stages, case kinds and channels under extension names.

The spec's own names are closed lists; anything a plugin adds is named
``x-<namespace>.<name>`` (:data:`EXTENSION_NAME`). A stage a plugin adds
registers the JSON Schema of its outcome; a run that plans it records that
schema's ``$id`` and digest and the distribution that registered it in the run
manifest's ``stage_schemas``, so rows can be checked against the very schema
they were written under, and a validator without the plugin can say what to
install.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from .errors import PluginError, SpecError
from .hashing import digest_document
from .plugins import Registration, Registry
from .schemas import STAGES, SUPPORTED_MAJORS, CompiledSchema, spec_schemas

__all__ = [
    "EXTENSION_NAME",
    "is_extension_name",
    "outcome_schema",
    "stage_schema_entry",
    "stage_schemas",
    "usable_outcome_schemas",
]

#: An extension name: ``x-``, the plugin's namespace, a dot and the name (the spec's ``extension_name``).
EXTENSION_NAME = re.compile(r"x-[a-z0-9][a-z0-9-]{0,31}\.[a-z0-9][a-z0-9_-]{0,63}")


def is_extension_name(name: object) -> bool:
    """True for a name of the form ``x-<namespace>.<name>``."""
    return isinstance(name, str) and EXTENSION_NAME.fullmatch(name) is not None


def stage_schema_entry(registration: Registration) -> dict[str, Any]:
    """The run manifest's ``stage_schemas`` entry of a registered extension stage."""
    schema = registration.component.outcome_schema
    return {
        "id": schema["$id"],
        "digest": digest_document(schema),
        "distribution": registration.distribution,
        "version": registration.version,
    }


def stage_schemas(registry: Registry, stages: list[str] | tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """``stage_schemas`` of a run planning ``stages``: an entry for each that is not one of the spec's."""
    entries = {}
    for name in stages:
        registration = registry.registration("stages", name)
        if name not in STAGES and registration is not None:
            entries[name] = stage_schema_entry(registration)
    return entries


def usable_outcome_schemas(registry: Registry, stages: Iterable[str]) -> None:
    """Compile the outcome schemas of the extension stages among ``stages``, before a run or a validation uses them.

    Raises :class:`~assay.errors.PluginError` naming the plugin when one is not a valid JSON Schema (plugin
    loading checks only that it has an ``$id``: compiling needs libraries a light command never imports).
    """
    for name in stages:
        registration = registry.registration("stages", name)
        if name in STAGES or registration is None:
            continue
        try:
            outcome_schema(registration.component.outcome_schema)
        except SpecError as exc:
            raise PluginError(
                f"plugin {registration.plugin!r} registered stage {name!r} whose outcome schema cannot be used: {exc}"
            ) from None


def outcome_schema(schema: Mapping[str, Any]) -> CompiledSchema:
    """A stage's outcome schema, compiled once per content (with the spec's schemas in reach of its refs).

    Raises :class:`~assay.errors.SpecError` when it is not a valid JSON Schema.
    """
    digest = digest_document(schema)
    if digest not in _COMPILED:
        _COMPILED[digest] = spec_schemas(SUPPORTED_MAJORS[-1]).compile(schema)
    return _COMPILED[digest]


#: Compiled outcome schemas by digest: a process sees the few its plugins register.
_COMPILED: dict[str, CompiledSchema] = {}
