"""The generic core imports no design: what it knows of stages, verdicts and tables comes through registrations.

The import graph of ``core/assay`` is read from the source (every ``import``,
at module level or inside a function); from each generic module, every module
it can reach through imports is followed, and reaching a design module fails
with the chain that leads there. The generic set grows as the designs leave
core (issue 13, item 3): today the validator, the plugin contract and the
spec machinery; next the engine's driver, the reports and the CLI.
"""

from __future__ import annotations

import ast
from collections import deque
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[1] / "core"

#: Modules (and packages, with everything below them) that hold one design's knowledge.
DESIGNS = (
    "assay.engine.stages.semantic",
    "assay.engine.stages.audit",
    "assay.engine.stages.exec",
    "assay.engine.stages.trajectory",
    "assay.engine.stages.trajectory_scoring",
    "assay.engine.stages.permission",
    "assay.engine.stages.rederive",
    "assay.engine.stages.replay",
    "assay.permissions",
    "assay.judges",
    "assay.default_plugins",
    "assay.reports._tables",
    "assay.reports._permission_tables",
    "assay.reports.trajectory_pairs",
    "assay.review",
    "assay.rejudge",
    "assay.backends.scripted",
    "assay.sandboxes",
)

#: Modules (and packages) that must know no design.
GENERIC = (
    "assay.validate",
    "assay.plugins",
    "assay.hookspecs",
    "assay.components",
    "assay.extensions",
    "assay.stage_order",
    "assay.rederive",
    "assay.schemas",
    "assay.summary",
    "assay.packs",
    "assay.bundle",
    "assay.hashing",
    "assay.documents",
)


def _module_name(path: Path) -> str:
    parts = path.relative_to(CORE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, name: str) -> set[str]:
    """The core modules ``path`` (module ``name``) imports, absolute, anywhere in its body."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)  # `from . import x` imports a module
    return {module for module in found if module == "assay" or module.startswith("assay.")}


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    modules = {_module_name(path): path for path in (CORE / "assay").rglob("*.py")}
    return {name: {m for m in _imports(path, name) if m in modules} for name, path in modules.items()}


def _within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes)


def test_the_lists_name_modules_that_exist(graph):
    for name in (*DESIGNS, *GENERIC):
        assert any(_within(module, (name,)) for module in graph), f"{name} names no module of core"


def test_no_generic_module_reaches_a_design(graph):
    for start in sorted(module for module in graph if _within(module, GENERIC)):
        came_from: dict[str, str | None] = {start: None}
        queue = deque([start])
        while queue:
            module = queue.popleft()
            if _within(module, DESIGNS):
                chain, step = [], module
                while step is not None:
                    chain.append(step)
                    step = came_from[step]
                pytest.fail(f"{start} imports a design: {' -> '.join(reversed(chain))}")
            for imported in sorted(graph[module]):
                if imported not in came_from:
                    came_from[imported] = module
                    queue.append(imported)


def test_the_check_sees_an_import_inside_a_function(tmp_path):
    """The attack this test guards against: a lazy import of a design, hidden in a function body."""
    source = tmp_path / "lazy.py"
    source.write_text("def f():\n    from .engine.stages import audit\n    return audit\n")
    assert "assay.engine.stages.audit" in _imports(source, "assay.lazy")
