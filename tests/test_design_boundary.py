"""The generic core imports no design: what it knows of stages, verdicts and tables comes through registrations.

The import graph of ``core/assay`` is read from the source (every ``import``,
at module level or inside a function); from each generic module, every module
it can reach through imports is followed, and reaching a design module fails
with the chain that leads there. Designs are independent of one another too:
none imports another. The built-in designs are registered by name in
``DEFAULT_PLUGINS``, never imported.
"""

from __future__ import annotations

import ast
from collections import deque
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[1] / "core"

#: The packages that hold the three designs, each a plugin registered only through the hooks.
DESIGNS = (
    "assay.designs.staged",
    "assay.designs.trajectory",
    "assay.designs.permission",
)

#: Everything else is generic core: the engine, validator, reports, CLI, plugin contract and sandboxes.
GENERIC = ("assay",)


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
    for start in sorted(module for module in graph if _within(module, GENERIC) and not _within(module, DESIGNS)):
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
    source.write_text("def f():\n    from .designs.staged import audit\n    return audit\n")
    assert "assay.designs.staged.audit" in _imports(source, "assay.lazy")


def test_no_generic_module_names_a_design_module_in_a_string():
    """An import by name (``importlib``, ``lazy``) is an import too: only DEFAULT_PLUGINS names the designs."""
    for path in sorted((CORE / "assay").rglob("*.py")):
        name = _module_name(path)
        if _within(name, DESIGNS) or name == "assay.plugins":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert "assay.designs." not in node.value.replace("assay.designs.<", ""), (
                    f"{name} names a design module in a string: {node.value[:80]!r}"
                )


def test_no_design_imports_another(graph):
    for design in DESIGNS:
        for module in sorted(m for m in graph if _within(m, (design,))):
            others = sorted(m for m in graph[module] if _within(m, DESIGNS) and not _within(m, (design,)))
            assert not others, f"{module} (design {design}) imports another design: {', '.join(others)}"


def test_every_design_is_a_default_plugin_and_nothing_else_names_one():
    from assay.plugins import DEFAULT_PLUGINS

    assert [p for p in DEFAULT_PLUGINS if p.startswith("assay.designs.")] == [f"{d}.plugin" for d in DESIGNS]


def test_designs_import_only_core_modules_that_are_public(graph):
    """A design is written as a third party would write it: against core's public modules, never a private one."""
    for module in sorted(m for m in graph if _within(m, DESIGNS)):
        private = sorted(
            m for m in graph[module] if not _within(m, DESIGNS) and any(p.startswith("_") for p in m.split("."))
        )
        assert not private, f"{module} imports private modules of core: {', '.join(private)}"
