"""Helpers the red-team tests share: lay out a jail environment, run Python in it, read the denials, call a tool."""

from __future__ import annotations

import asyncio
import contextlib
import textwrap
from collections.abc import Iterator, Mapping
from typing import Any

from conftest import EXAMPLE_PACK

from assay.designs.permission.environment import Layout, materialize
from assay.designs.staged.sandbox import LocalSandboxFactory
from assay.sandboxes.box import box_dir, remove_box_dir

#: The executables a policy grants so that attacks written in Python (or bash) can run at all.
PYTHON = ("/bin/bash", "/usr/bin/python3*")


@contextlib.contextmanager
def laid_out(environment: Mapping[str, Any]) -> Iterator[Layout]:
    """A permission-task environment materialized in a fresh box directory, removed afterwards."""
    root = box_dir("assay-test-")
    try:
        yield materialize(environment, None, root / "root")
    finally:
        remove_box_dir(root)


def python(code: str) -> list[str]:
    """The argv that runs ``code`` (dedented) with the system Python, as a jailed command."""
    return ["/usr/bin/python3", "-c", textwrap.dedent(code)]


def denied(result: Any) -> set[tuple[str, str]]:
    """(op, path) of every denial a jail run recorded."""
    return {(d.op, d.path) for d in result.denials}


@contextlib.contextmanager
def example_sandbox(case: Mapping[str, Any]) -> Iterator[Any]:
    """A local exec sandbox for ``case`` over the example pack, closed afterwards."""
    box = LocalSandboxFactory().create(case, pack_root=EXAMPLE_PACK)
    try:
        yield box
    finally:
        box.close()


def call(box: Any, name: str, **arguments: Any) -> str:
    """One tool call, as the agent would make it."""
    return asyncio.run(box.call(name, arguments))
