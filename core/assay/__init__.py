"""assay: an open, versioned standard and engine for agent-safety benchmarks.

The plugin contract is :mod:`assay.hookspecs`; plugins decorate their hook
implementations with :data:`hookimpl`.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .hookspecs import hookimpl

__all__ = ["__version__", "hookimpl"]
