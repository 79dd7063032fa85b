"""Standing in for a callable until it is first called, so that loading plugins stays cheap.

A plugin registers its components when every command starts; the code that
runs a stage, re-derives its verdicts or builds a report section is imported
only when a run, a validation or a report first calls it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["lazy"]


def lazy(target: str) -> Callable[..., Any]:
    """A callable standing for ``"package.module:attribute"``, imported at its first call and called with its arguments.

    The attribute may be a function (a coroutine function too: the call returns
    its awaitable) or a class (the call makes an instance).
    """
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"lazy target {target!r}: expected 'package.module:attribute'")
    found: list[Callable[..., Any]] = []

    def call(*args: Any, **kwargs: Any) -> Any:
        if not found:
            found.append(getattr(importlib.import_module(module_name), attribute))
        return found[0](*args, **kwargs)

    call.__qualname__ = call.__name__ = attribute
    call.__module__ = module_name
    return call
