"""The one exception hierarchy of assay.

Only the CLI turns these into messages and exit codes (one line each:
:attr:`AssayError.exit_code` is the status, 1 unless a subclass says
otherwise); library code raises them and never prints::

    AssayError                      exit 1
    ├── UsageError                  exit 2: the caller asked for something impossible
    ├── PluginError                 plugin loading or registration failed
    │   └── DuplicateNameError      two plugins registered the same component name
    ├── SpecError                   a document does not satisfy the spec
    │   ├── DocumentError           a file is not a readable JSON or YAML document (also a ValueError)
    │   └── EnvironmentSpecError    a task environment cannot be laid down as specified (also a ValueError)
    ├── PackError                   a pack could not be found or loaded
    │   └── PackInvalid             a pack does not validate; ``findings`` are the validator's lines
    ├── ArchiveError                an untrusted archive is unsafe or unreadable
    ├── ConfinementError            this machine cannot confine a child as asked; nothing ran
    │   ├── JailError               the permission jail could not be built
    │   │   └── LandlockUnavailable a policy was given and the kernel has no Landlock
    │   ├── LandlockError           a Landlock call failed (also an OSError, with its errno)
    │   └── StraceNotFound          tracing was asked for and strace is not installed
    ├── BackendError                a model call failed for good, after its retry budget
    ├── PreflightError              an endpoint failed its request before the run; nothing was written
    ├── RunHealthError              a finished run has too many error rows (its bundle is kept)
    ├── RunLocked                   another process is running in the same --out (exit 2)
    └── TransportError              one HTTP attempt failed; backends retry these
        ├── TransportTimeout        the attempt timed out
        └── TransportFailure        the connection failed or the response was cut short

The classes that are also a builtin error (``ValueError``, ``OSError``) keep
that base so code written against the builtin still catches them.
"""

from __future__ import annotations

__all__ = [
    "ArchiveError",
    "AssayError",
    "BackendError",
    "ConfinementError",
    "DocumentError",
    "DuplicateNameError",
    "EnvironmentSpecError",
    "JailError",
    "LandlockError",
    "LandlockUnavailable",
    "PackError",
    "PackInvalid",
    "PluginError",
    "PreflightError",
    "RunHealthError",
    "RunLocked",
    "SpecError",
    "StraceNotFound",
    "TransportError",
    "TransportFailure",
    "TransportTimeout",
    "UsageError",
]


class AssayError(Exception):
    """Base of every error assay raises on purpose."""

    #: The command line's exit status for this error.
    exit_code: int = 1


class UsageError(AssayError):
    """The request cannot be carried out as asked (bad option, unknown name)."""

    exit_code = 2


class PluginError(AssayError):
    """A plugin failed to load or registered something invalid."""


class DuplicateNameError(PluginError):
    """Two plugins registered a component of the same kind under the same name.

    Benchmark identifiers must be stable, so a collision is never resolved by
    renaming: both plugins are named and loading stops.
    """

    def __init__(self, kind: str, name: str, first: str, second: str) -> None:
        self.kind, self.name, self.first, self.second = kind, name, first, second
        super().__init__(f"duplicate {kind} {name!r}: registered by plugin {first!r} and by plugin {second!r}")


class SpecError(AssayError):
    """A document does not satisfy the assay spec."""


class DocumentError(SpecError, ValueError):
    """A file could not be parsed as a JSON or YAML document; ``line`` is where, when known."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


class EnvironmentSpecError(SpecError, ValueError):
    """A task's environment specification is invalid or unsafe; nothing was laid down past it."""


class PackError(AssayError):
    """A case pack could not be located or read."""


class PackInvalid(PackError):
    """A pack does not validate, so nothing of it may run; ``findings`` are the validator's lines, one per problem."""

    def __init__(self, message: str, findings: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.findings = findings


class ArchiveError(AssayError):
    """An archive is unsafe (path traversal, links, size) or unreadable."""


class ConfinementError(AssayError):
    """A child process could not be confined as asked, so it was not started."""


class JailError(ConfinementError):
    """The permission jail could not be set up; nothing of the command ran."""


class LandlockUnavailable(JailError):
    """A policy was given but this kernel cannot enforce it with Landlock."""


class LandlockError(ConfinementError, OSError):
    """A Landlock system call failed (``errno`` set when the kernel gave one), or the kernel has no Landlock."""


class StraceNotFound(ConfinementError):
    """The strace binary needed to trace a command is not installed."""


class BackendError(AssayError):
    """A model call failed for good (after the retry budget); the work item becomes an error row.

    ``kind`` names the failure for the row (``timeout``, ``http_503``, ...);
    ``attempts`` is how many calls were made.
    """

    def __init__(self, message: str, *, kind: str = "backend", attempts: int = 1) -> None:
        super().__init__(message)
        self.kind = kind
        self.attempts = attempts


class TransportError(AssayError):
    """One HTTP attempt of a backend failed; the backend retries or turns it into a :class:`BackendError`."""


class TransportTimeout(TransportError):
    """The request timed out."""


class TransportFailure(TransportError):
    """The connection failed or the response was cut short."""


class PreflightError(AssayError):
    """An endpoint failed the one request sent before a run (a refused connection, a 404, a bad body)."""


class RunHealthError(AssayError):
    """A run finished, but more of an endpoint's rows are error rows than ``--max-error-rate`` allows.

    The bundle is sealed and kept (the rows are a faithful record); the run
    exits non-zero so that no script mistakes it for a measurement.
    """


class RunLocked(AssayError):
    """Another process holds the run directory: two runs in one ``--out`` would pay for every call twice."""

    exit_code = 2
