"""House rules that tests enforce: sorted, resolvable __all__; docstrings on public functions."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import assay

# __main__ modules run on import, so they are left out.
MODULES = sorted(
    name for _, name, _ in pkgutil.walk_packages(assay.__path__, "assay.") if not name.endswith("__main__")
)


@pytest.mark.parametrize("name", MODULES)
def test_all_is_sorted_and_resolves(name):
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    if exported is None:
        return
    assert list(exported) == sorted(exported), f"{name}.__all__ is not sorted"
    for symbol in exported:
        assert hasattr(module, symbol), f"{name}.__all__ names missing {symbol}"


@pytest.mark.parametrize("name", MODULES)
def test_public_functions_and_classes_have_docstrings(name):
    module = importlib.import_module(name)
    assert inspect.getdoc(module), f"{name} has no module docstring"
    for symbol in getattr(module, "__all__", []):
        value = getattr(module, symbol)
        if inspect.isfunction(value) or inspect.isclass(value):
            assert inspect.getdoc(value), f"{name}.{symbol} has no docstring"
