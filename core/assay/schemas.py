"""The standard as package data: schemas by spec version, and validators for them.

Schemas are read once per :class:`SpecSchemas` into an immutable
``referencing.Registry``. The validator set is chosen from a table keyed by
the document's major spec version, so a reader keeps accepting every version
it has published. Two validators per document: ``jsonschema-rs`` answers the
fast yes/no; the pure-Python ``jsonschema`` explains failures (it ranks
errors with ``best_match``).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import SpecError

# The validator libraries are imported when a document is first validated, not
# when schemas are merely read: `assay schema` and `assay --help` need none of them.
if TYPE_CHECKING:
    import jsonschema
    import jsonschema_rs
    import referencing

__all__ = [
    "CASE_KINDS",
    "CHANNELS",
    "CompiledSchema",
    "DOCUMENT_NAMES",
    "STAGES",
    "SUPPORTED_MAJORS",
    "SchemaViolation",
    "SpecSchemas",
    "major_of",
    "spec_dir",
    "spec_schemas",
]

#: Document schema names (files ``<name>.schema.json``), ``defs`` excluded.
DOCUMENT_NAMES: tuple[str, ...] = (
    "case",
    "pack",
    "defense_policy",
    "permission_policy",
    "result_row",
    "run_manifest",
    "bundle",
    "metrics_summary",
    "signature",
)

#: The vocabularies the spec defines (a test holds them equal to the schemas' enums): the case kinds, the
#: stages a result row may carry (in the order the engine runs them) and the injection channels.
CASE_KINDS: tuple[str, ...] = ("attack", "benign", "trajectory", "permission")
STAGES: tuple[str, ...] = ("semantic", "audit", "exec", "trajectory", "permission")
CHANNELS: tuple[str, ...] = ("user_turn", "document", "web_page", "tool_return", "memory_entry")

#: Major spec versions this engine reads, newest last.
SUPPORTED_MAJORS: tuple[int, ...] = (1,)
CURRENT_SPEC_VERSION = "1.1"


def spec_dir() -> Path:
    """The directory holding ``v1/``: the packaged copy, else the source checkout's ``spec/``."""
    packaged = resources.files("assay") / "_spec"
    if packaged.is_dir():
        return Path(str(packaged))
    checkout = Path(__file__).resolve().parents[2] / "spec"
    if (checkout / "v1").is_dir():
        return checkout
    raise SpecError("the assay spec files are missing from this installation")


def major_of(spec_version: object) -> int | None:
    """The major number of a ``spec_version`` string, or None when it is not of the form M.N."""
    if not isinstance(spec_version, str):
        return None
    major, dot, minor = spec_version.partition(".")
    if not dot or not major.isdigit() or not minor.isdigit():
        return None
    return int(major)


@dataclass(frozen=True)
class SchemaViolation:
    """One way a document breaks its schema: where (JSON pointer), what, and which keyword."""

    pointer: str
    message: str
    keyword: str


def _pointer(path: Any) -> str:
    parts = [str(part).replace("~", "~0").replace("/", "~1") for part in path]
    return "/" + "/".join(parts) if parts else ""


def _relevance(error: jsonschema.ValidationError) -> Any:
    import jsonschema.exceptions

    # best_match's ordering (it takes the max: shallow, strong-keyword errors win).
    return jsonschema.exceptions.relevance(error)


def _ancestors(error: jsonschema.ValidationError) -> Iterator[Any]:
    parent = error.parent
    while parent is not None:
        yield parent
        parent = parent.parent


def _spec_names_or_extension(error: jsonschema.ValidationError) -> list[Any] | None:
    """The spec's names, where ``error`` is an anyOf of them and an extension name (stage, kind, channel)."""
    if error.validator != "anyOf" or not isinstance(error.validator_value, list):
        return None
    branches = error.validator_value
    names = next((b["enum"] for b in branches if isinstance(b, dict) and "enum" in b), None)
    extension = any(isinstance(b, dict) and str(b.get("$ref", "")).endswith("/$defs/extension_name") for b in branches)
    return list(names) if names is not None and extension else None


def _matches_any(name: str, patterns: dict[str, Any]) -> bool:
    return any(re.search(pattern, name) for pattern in patterns)


class SpecSchemas:
    """Every schema of one major spec version, with compiled validators."""

    def __init__(self, major: int, directory: Path) -> None:
        self.major = major
        self.directory = directory
        self.raw: dict[str, dict[str, Any]] = {}
        for path in sorted(directory.glob("*.schema.json")):
            self.raw[path.name[: -len(".schema.json")]] = json.loads(path.read_text(encoding="utf-8"))
        missing = [name for name in (*DOCUMENT_NAMES, "defs") if name not in self.raw]
        if missing:
            raise SpecError(f"spec v{major} is missing schemas: {', '.join(missing)}")

    @functools.cached_property
    def registry(self) -> referencing.Registry[Any]:
        """Every schema of this version as an immutable ``referencing.Registry`` (built on first use)."""
        import referencing
        from referencing.jsonschema import DRAFT202012

        resources_ = [(schema["$id"], DRAFT202012.create_resource(schema)) for schema in self.raw.values()]
        return referencing.Registry().with_resources(resources_).crawl()

    @functools.cached_property
    def _rs_registry(self) -> jsonschema_rs.Registry:
        import jsonschema_rs

        return jsonschema_rs.Registry([(schema["$id"], schema) for schema in self.raw.values()])

    def schema(self, name: str) -> dict[str, Any]:
        """The raw schema document of a document type (or ``defs``)."""
        try:
            return self.raw[name]
        except KeyError:
            raise SpecError(f"no schema named {name!r} in spec v{self.major}") from None

    @functools.cached_property
    def _fast(self) -> dict[str, jsonschema_rs.Validator]:
        import jsonschema_rs

        return {
            name: jsonschema_rs.Draft202012Validator(self.raw[name], registry=self._rs_registry)
            for name in DOCUMENT_NAMES
        }

    @functools.cached_property
    def _explainers(self) -> dict[str, jsonschema.Draft202012Validator]:
        import jsonschema

        return {
            name: jsonschema.Draft202012Validator(self.raw[name], registry=self.registry) for name in DOCUMENT_NAMES
        }

    def is_valid(self, name: str, document: Any) -> bool:
        """Fast yes/no validation of a document against the schema ``name``."""
        return self._fast[name].is_valid(document)

    def violations(self, name: str, document: Any) -> list[SchemaViolation]:
        """Every violation, most relevant first (best_match ordering)."""
        errors = sorted(self._explainers[name].iter_errors(document), key=_relevance, reverse=True)
        return [self._describe(error) for error in errors]

    def validate(self, name: str, document: Any) -> list[SchemaViolation]:
        """Violations of a document, or an empty list; the fast path runs first."""
        if self.is_valid(name, document):
            return []
        return self.violations(name, document) or self._fast_violations(name, document)

    def _fast_violations(self, name: str, document: Any) -> list[SchemaViolation]:
        # The two engines disagree on rare regex corners: Python's re lets '$'
        # match before a trailing newline, Rust's regex does not. The Rust
        # verdict follows ECMA-262 as JSON Schema asks, so it wins; its
        # errors then explain the failure.
        return [
            SchemaViolation(
                _pointer(error.instance_path), error.message, str(error.schema_path[-1]) if error.schema_path else ""
            )
            for error in self._fast[name].iter_errors(document)
        ]

    @staticmethod
    def _describe(error: jsonschema.ValidationError) -> SchemaViolation:
        import jsonschema.exceptions

        # For a oneOf/anyOf failure the deepest matching branch says more.
        best = jsonschema.exceptions.best_match([error])
        chosen = best if best is not None else error
        # A name that may be one of the spec's or an extension name (spec 1.1): both alternatives, in one line,
        # rather than the extension pattern alone, which a misspelt spec name (tool-return) would get.
        for failed in (chosen, *_ancestors(chosen)):
            spec_names = _spec_names_or_extension(failed)
            if spec_names is not None:
                message = (
                    f"{failed.instance!r} is not one of {spec_names!r} "
                    "nor an extension name (x-<namespace>.<name>, from a plugin)"
                )
                return SchemaViolation(_pointer(failed.absolute_path), message, "enum")
        if chosen.validator == "additionalProperties" and isinstance(chosen.schema, dict):
            patterns = chosen.schema.get("patternProperties", {})
            if any(pattern.startswith("^x-") for pattern in patterns) and isinstance(chosen.instance, dict):
                known = list(chosen.schema.get("properties", {}))
                extra = sorted(k for k in chosen.instance if k not in known and not _matches_any(k, patterns))
                if extra:
                    message = (
                        f"{extra[0]!r} is not one of {known!r} "
                        "nor an extension name (x-<namespace>.<name>, from a plugin)"
                    )
                    return SchemaViolation(_pointer(chosen.absolute_path), message, "additionalProperties")
        return SchemaViolation(_pointer(chosen.absolute_path), chosen.message, str(chosen.validator))

    def documents(self) -> Iterator[str]:
        """Names of the document schemas."""
        return iter(DOCUMENT_NAMES)

    def compile(self, schema: Mapping[str, Any]) -> CompiledSchema:
        """A plugin's schema (a stage's outcome schema, say), compiled with this version's schemas in reach of its
        ``$ref``s. Raises :class:`~assay.errors.SpecError` when it is not a valid JSON Schema (draft 2020-12)."""
        import jsonschema
        import jsonschema_rs

        try:
            jsonschema.Draft202012Validator.check_schema(schema)
            fast = jsonschema_rs.Draft202012Validator(dict(schema), registry=self._rs_registry)
        except (jsonschema.SchemaError, ValueError) as exc:
            raise SpecError(f"not a valid JSON Schema: {str(exc).splitlines()[0]}") from None
        return CompiledSchema(fast, jsonschema.Draft202012Validator(schema, registry=self.registry))


class CompiledSchema:
    """A compiled schema outside the spec's documents: a fast verdict, and the violations explained."""

    def __init__(self, fast: jsonschema_rs.Validator, explainer: jsonschema.Draft202012Validator) -> None:
        self._fast, self._explainer = fast, explainer

    def is_valid(self, document: Any) -> bool:
        """Fast yes/no validation."""
        return bool(self._fast.is_valid(document))

    def violations(self, document: Any) -> list[SchemaViolation]:
        """Every violation, most relevant first; empty when the document is valid."""
        if self._fast.is_valid(document):
            return []
        errors = sorted(self._explainer.iter_errors(document), key=_relevance, reverse=True)
        return [SpecSchemas._describe(error) for error in errors] or [SchemaViolation("", "invalid", "")]


@functools.cache
def spec_schemas(major: int = 1) -> SpecSchemas:
    """The schemas of a supported major spec version (read once per process)."""
    if major not in SUPPORTED_MAJORS:
        supported = ", ".join(str(m) for m in SUPPORTED_MAJORS)
        raise SpecError(f"spec major version {major} is not supported (this engine reads {supported})")
    return SpecSchemas(major, spec_dir() / f"v{major}")
