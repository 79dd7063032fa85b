"""Finding, loading and registering plugins.

Loading is explicit: nothing happens at import time. :func:`load_plugins`
builds a fresh :class:`PluginHost` that registers the built-in modules of
:data:`DEFAULT_PLUGINS` and every entry point of the ``assay`` group, then
collects the components each plugin registers through the ``register_*``
hooks into a host-owned :class:`Registry`.

Environment switches (read by :func:`load_plugins`):

``ASSAY_PLUGINS``
    Comma-separated allow-list of entry-point plugin names; only these load.
``ASSAY_BLOCK_PLUGINS``
    Comma-separated plugin names (entry-point names or built-in module
    paths) that are never loaded.
``ASSAY_DISABLE_PLUGIN_AUTOLOAD``
    When set to a non-empty value other than ``0``, no entry points load.
``ASSAY_TRACE_HOOKS``
    When set, every hook call is printed to standard error.
"""

from __future__ import annotations

import importlib
import importlib.metadata as metadata
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pluggy

from . import __version__, hookspecs
from .distributions import files_digest
from .errors import DuplicateNameError, PluginError

__all__ = [
    "DEFAULT_PLUGINS",
    "ENTRY_POINT_GROUP",
    "KINDS",
    "PluginHost",
    "Registration",
    "Registry",
    "load_plugins",
    "singular",
]

ENTRY_POINT_GROUP = "assay"

#: Built-in plugins, registered through the same hooks as third-party ones.
DEFAULT_PLUGINS: tuple[str, ...] = (
    "assay.default_plugins.oracles",
    "assay.default_plugins.backends",
    "assay.default_plugins.executors",
    "assay.default_plugins.commands",
    "assay.designs.staged.plugin",
    "assay.designs.trajectory.plugin",
    "assay.designs.permission.plugin",
)

#: Component kinds, each registered through the hook ``register_<kind>``.
KINDS: tuple[str, ...] = (
    "packs",
    "case_kinds",
    "channels",
    "stages",
    "tools",
    "families",
    "backends",
    "judges",
    "oracles",
    "metrics",
    "sandboxes",
    "defenses",
    "executors",
    "outcomes",
    "analyses",
    "report_sections",
    "commands",
)


def singular(kind: str) -> str:
    """The singular of a component kind, for messages ("families" -> "family", "case_kinds" -> "case kind")."""
    irregular = {"families": "family", "sandboxes": "sandbox", "analyses": "analysis"}
    return irregular.get(kind) or kind[:-1].replace("_", " ")


@dataclass(frozen=True)
class Registration:
    """A registered component and the plugin, distribution and version it came from."""

    kind: str
    name: str
    component: Any
    plugin: str
    distribution: str | None
    version: str | None
    #: Names the plugin had before (its ``ASSAY_FORMER_NAMES``): a bundle recorded under one is the same provenance.
    former_plugins: tuple[str, ...] = ()

    def describe(self) -> dict[str, Any]:
        """A JSON-ready description, as ``assay plugins --json`` and run manifests show it."""
        return {
            "kind": self.kind,
            "name": self.name,
            "plugin": self.plugin,
            "distribution": self.distribution,
            "version": self.version,
            **({"files_sha256": digest} if (digest := files_digest(self.distribution)) else {}),
        }


class Registry:
    """Components by kind and name, owned by one :class:`PluginHost`."""

    def __init__(self) -> None:
        self._by_kind: dict[str, dict[str, Registration]] = {kind: {} for kind in KINDS}

    def add(self, registration: Registration) -> None:
        """Record a component; a second one of the same kind and name raises DuplicateNameError."""
        table = self._by_kind[registration.kind]
        existing = table.get(registration.name)
        if existing is not None:
            raise DuplicateNameError(
                singular(registration.kind), registration.name, existing.plugin, registration.plugin
            )
        table[registration.name] = registration

    def get(self, kind: str, name: str | None) -> Any | None:
        """The component of that kind and name, or None (also for a None name: a document that names none)."""
        registration = None if name is None else self._by_kind[kind].get(name)
        return None if registration is None else registration.component

    def registration(self, kind: str, name: str | None) -> Registration | None:
        """The registration (component, plugin, distribution, version) of that kind and name, or None."""
        return None if name is None else self._by_kind[kind].get(name)

    def names(self, kind: str) -> list[str]:
        """The sorted names of every component of a kind."""
        return sorted(self._by_kind[kind])

    def items(self, kind: str) -> dict[str, Any]:
        """Name to component for one kind, sorted by name."""
        return {name: self._by_kind[kind][name].component for name in self.names(kind)}

    def registrations(self, kind: str | None = None) -> Iterator[Registration]:
        """Every registration (or every one of ``kind``), by kind (in KINDS order) then name."""
        for each in KINDS if kind is None else (kind,):
            table = self._by_kind[each]
            for name in sorted(table):
                yield table[name]


def _expected_type(kind: str) -> type | None:
    # Imported lazily: components and packs are light, click only matters for commands.
    from . import components
    from .packs import Pack

    if kind == "commands":
        import click

        return click.Command
    return {
        "packs": Pack,
        "case_kinds": components.CaseKind,
        "channels": components.Channel,
        "stages": components.Stage,
        "tools": components.Tool,
        "families": components.Family,
        "defenses": components.Defense,
        "oracles": components.Oracle,
        "metrics": components.Metric,
        "backends": components.Backend,
        "judges": components.Judge,
        "sandboxes": components.Sandbox,
        "executors": components.Executor,
        "outcomes": components.Outcome,
        "analyses": components.Analysis,
        "report_sections": components.ReportSection,
    }.get(kind)


def _protocol_members(protocol: type) -> list[str]:
    """The members a runtime-checkable protocol requires, in the order its classes declare them."""
    members: dict[str, None] = {}
    for cls in reversed(protocol.__mro__):
        if cls is object or not getattr(cls, "_is_protocol", False) or cls.__module__ == "typing":
            continue
        for name in (*getattr(cls, "__annotations__", {}), *vars(cls)):
            if not name.startswith("_"):
                members[name] = None
    return list(members)


def _component_name(kind: str, component: Any, plugin: str) -> str:
    expected = _expected_type(kind)
    if expected is not None and not isinstance(component, expected):
        missing = []
        if getattr(expected, "_is_protocol", False):
            missing = [member for member in _protocol_members(expected) if not hasattr(component, member)]
        lacks = f": it has no {', '.join(repr(m) for m in missing)}" if missing else ""
        raise PluginError(
            f"plugin {plugin!r} registered {component!r} as a {singular(kind)}, but it is not a "
            f"{expected.__name__}{lacks} (see the {expected.__name__} protocol in assay.components)"
        )
    name = getattr(component, "name", None)
    if not isinstance(name, str) or not name:
        raise PluginError(
            f"plugin {plugin!r} registered a {singular(kind)} without a non-empty string 'name': {component!r}"
        )
    return name


#: OpenAI function names, what a model calls a tool by.
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _reference_problems(registry: Registry) -> list[str]:
    """Every family and stage naming a case kind, stage or channel that no plugin registered, or a stage that
    needs what cannot run before it: one line each, naming the plugin."""
    from .extensions import is_extension_name
    from .schemas import CASE_KINDS, CHANNELS, STAGES

    problems = []
    kinds, stages = set(registry.names("case_kinds")), registry.items("stages")
    channels, defenses = set(registry.names("channels")), set(registry.names("defenses"))
    for kind, spec_names in (("case_kinds", CASE_KINDS), ("channels", CHANNELS), ("stages", STAGES)):
        for registration in registry.registrations(kind):
            if registration.name not in spec_names and not is_extension_name(registration.name):
                problems.append(
                    f"plugin {registration.plugin!r} registered the {singular(kind)} {registration.name!r}: a name "
                    f"the spec does not define must be an extension name, x-<namespace>.<name>"
                )
    for registration in registry.registrations("stages"):
        schema = registration.component.outcome_schema
        if registration.name in STAGES:
            continue
        # Only the shape here: compiling the schema needs the JSON Schema libraries, which a light command
        # (--help, plugins --json) never imports; a run or a validation that uses the stage compiles it first
        # (assay.extensions.usable_outcome_schemas) and refuses a broken one in the same words.
        if not isinstance(schema, Mapping) or not isinstance(schema.get("$id"), str):
            problems.append(
                f"plugin {registration.plugin!r} registered stage {registration.name!r} whose outcome schema "
                "cannot be used: it has no $id (runs record it by $id and digest)"
            )
    for registration in registry.registrations("stages"):
        stage = registration.component
        for what, values, known in (("case kind", stage.kinds, kinds), ("stage", stage.needs, set(stages))):
            for value in values:
                if value not in known:
                    problems.append(
                        f"plugin {registration.plugin!r} registered stage {stage.name!r} naming the {what} "
                        f"{value!r}, which no plugin registers (known: {', '.join(sorted(known))})"
                    )
    sandboxes = set(registry.names("sandboxes"))
    for registration in registry.registrations("tools"):
        tool = registration.component
        if not _TOOL_NAME.fullmatch(tool.name):
            problems.append(
                f"plugin {registration.plugin!r} registered the tool {tool.name!r}: a tool's name is what a model "
                "calls, 1-64 letters, digits, '_' or '-'"
            )
        for sandbox in tool.sandboxes:
            if sandbox not in sandboxes:
                problems.append(
                    f"plugin {registration.plugin!r} registered the tool {tool.name!r} implemented by the sandbox "
                    f"{sandbox!r}, which no plugin registers (known: {', '.join(sorted(sandboxes))})"
                )
    for registration in registry.registrations("families"):
        family = registration.component
        for what, values, known in (
            ("case kind", (family.kind,), kinds),
            ("stage", family.stages, set(stages)),
            ("channel", family.channels, channels),
            ("condition", family.conditions, defenses),
        ):
            for value in values:
                if value not in known:
                    problems.append(
                        f"plugin {registration.plugin!r} registered family {family.name!r} with the {what} "
                        f"{value!r}, which no plugin registers (known: {', '.join(sorted(known))})"
                    )
        for name in family.stages:
            stage = stages.get(name)
            if stage is not None and family.kind not in stage.kinds:
                problems.append(
                    f"plugin {registration.plugin!r} registered family {family.name!r} of kind {family.kind!r} "
                    f"with the stage {name!r}, which runs on {', '.join(stage.kinds)} cases only"
                )
    return problems


def _split(value: str | None) -> set[str]:
    return {part.strip() for part in (value or "").split(",") if part.strip()}


def _truthy(value: str | None) -> bool:
    return value is not None and value.strip().lower() not in ("", "0", "false", "no", "off")


class PluginHost:
    """One pluggy manager plus the registry its plugins filled.

    Create it with :func:`load_plugins`; tests may create an empty one and
    :meth:`register` throwaway plugin objects.
    """

    def __init__(self) -> None:
        self.pm = pluggy.PluginManager("assay")
        self.pm.add_hookspecs(hookspecs)
        self.registry = Registry()
        self._sources: dict[str, tuple[str | None, str | None]] = {}
        self._trace: Callable[[str], Any] | None = None
        self._loading = False  # while load_plugins registers a set of plugins, references are checked at its end

    def enable_trace(self, write: Callable[[str], Any]) -> None:
        """Report every hook call (pluggy's tracer) and every registration through ``write``."""
        self._trace = write
        self.pm.trace.root.setwriter(write)
        self.pm.enable_tracing()

    def register(
        self, plugin: object, name: str, *, distribution: str | None = None, version: str | None = None
    ) -> None:
        """Register one plugin object and collect the components it registers."""
        if self.pm.get_plugin(name) is not None:
            raise PluginError(f"plugin {name!r} is registered twice")
        former = getattr(plugin, "ASSAY_FORMER_NAMES", ())
        if not isinstance(former, tuple) or not all(isinstance(n, str) and n for n in former):
            raise PluginError(f"plugin {name!r}: ASSAY_FORMER_NAMES must be a tuple of plugin names")
        try:
            self.pm.register(plugin, name=name)
            self._sources[name] = (distribution, version)
            self.pm.check_pending()
        except pluggy.PluginValidationError as exc:
            # e.g. a misspelled hook (register_pack) or an argument no hook has
            if self.pm.is_registered(plugin):
                self.pm.unregister(plugin)
            raise PluginError(f"plugin {name!r} does not fit the assay hooks: {exc}") from None
        for kind in KINDS:
            hook = getattr(self.pm.hook, f"register_{kind}")
            for impl in hook.get_hookimpls():
                if impl.plugin_name == name:
                    # Each implementation is called on its own so the host knows
                    # which plugin registered each component.
                    if self._trace is not None:
                        self._trace(f"assay hook register_{kind} -> plugin {name}\n")
                    impl.function(register=self._registrar(kind, name, former))
        if not self._loading:
            self.check_references()

    def check_references(self) -> None:
        """Raise :class:`PluginError` for the first family or stage naming what no plugin registered.

        Run once every plugin of :func:`load_plugins` is registered (the
        plugins come in name order, so a family may come before its stage),
        and after each :meth:`register` afterwards.
        """
        from .stage_order import stage_order

        problems = _reference_problems(self.registry)
        if problems:
            raise PluginError(problems[0])
        stage_order(self.registry.items("stages"))  # needs that go round in a circle

    def _registrar(self, kind: str, plugin_name: str, former: tuple[str, ...] = ()) -> Callable[[object], None]:
        distribution, version = self._sources[plugin_name]

        def register(component: object) -> None:
            component_name = _component_name(kind, component, plugin_name)
            if kind == "judges":
                from .judging import declaration_problem  # judging needs Registration from here

                problem = declaration_problem(component)
                if problem is not None:
                    raise PluginError(
                        f"plugin {plugin_name!r} registered judge {component_name!r}, but {problem} "
                        "(see the Judge protocol in assay.components)"
                    )
            if self._trace is not None:
                self._trace(f"assay   registered {singular(kind)} {component_name}\n")
            self.registry.add(Registration(kind, component_name, component, plugin_name, distribution, version, former))

        return register

    def plugin_names(self) -> list[str]:
        """Names of every registered plugin, sorted."""
        return sorted(name for name, _ in self.pm.list_name_plugin())

    def describe(self) -> list[dict[str, Any]]:
        """Every registered component with its plugin, distribution and version (for provenance)."""
        return [registration.describe() for registration in self.registry.registrations()]


def _entry_points() -> Iterable[metadata.EntryPoint]:
    return metadata.entry_points(group=ENTRY_POINT_GROUP)


def load_plugins(
    *,
    environ: Mapping[str, str] | None = None,
    entry_points: Callable[[], Iterable[metadata.EntryPoint]] = _entry_points,
    defaults: Iterable[str] = DEFAULT_PLUGINS,
) -> PluginHost:
    """Build a host with the built-in plugins and the ``assay`` entry points.

    ``environ`` defaults to :data:`os.environ`; see the module docstring for
    the switches it reads. Raises :class:`PluginError` when a plugin fails to
    import and :class:`DuplicateNameError` when two plugins register the same
    component name.
    """
    env = os.environ if environ is None else environ
    blocked = _split(env.get("ASSAY_BLOCK_PLUGINS"))
    allowed = _split(env.get("ASSAY_PLUGINS"))
    host = PluginHost()
    if _truthy(env.get("ASSAY_TRACE_HOOKS")):
        host.enable_trace(sys.stderr.write)

    host._loading = True
    try:
        _register_all(host, env, blocked, allowed, entry_points, defaults)
    finally:
        host._loading = False
    host.check_references()
    return host


def _register_all(
    host: PluginHost,
    env: Mapping[str, str],
    blocked: set[str],
    allowed: set[str],
    entry_points: Callable[[], Iterable[metadata.EntryPoint]],
    defaults: Iterable[str],
) -> None:
    for module_name in defaults:
        if module_name in blocked:
            continue
        host.register(importlib.import_module(module_name), module_name, distribution="assay", version=__version__)

    if _truthy(env.get("ASSAY_DISABLE_PLUGIN_AUTOLOAD")):
        return
    for entry_point in sorted(entry_points(), key=lambda ep: ep.name):
        if entry_point.name in blocked or (allowed and entry_point.name not in allowed):
            continue
        try:
            plugin = entry_point.load()
        except Exception as exc:  # a broken third-party plugin must be named, not crash opaquely
            raise PluginError(f"plugin {entry_point.name!r} ({entry_point.value}) failed to load: {exc}") from exc
        dist = getattr(entry_point, "dist", None)
        host.register(
            plugin,
            entry_point.name,
            distribution=dist.name if dist else None,
            version=dist.version if dist else None,
        )
