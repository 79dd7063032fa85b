"""The test tiers follow from the fixtures a test uses, and a fast-tier test cannot start a child unnoticed."""

from __future__ import annotations

import asyncio
import subprocess

import pytest
from conftest import SPAWNING, TIER_FIXTURES, TierGuard


@pytest.fixture
def uses_the_jail(confinement):
    """A fixture that needs confinement only through another fixture."""
    return "jail"


def test_a_fixture_puts_its_tier_on_the_test(request, children):
    assert request.node.get_closest_marker("subprocess") is not None
    assert request.node.get_closest_marker("jail") is None


def test_a_tier_reaches_a_test_through_other_fixtures(request, uses_the_jail):
    assert request.node.get_closest_marker("jail") is not None


def test_a_fast_test_carries_no_tier(request):
    assert not {marker.name for marker in request.node.iter_markers()} & SPAWNING


def test_every_tier_fixture_names_a_registered_marker(pytestconfig):
    registered = {line.split(":")[0] for line in pytestconfig.getini("markers")}
    assert set(TIER_FIXTURES.values()) <= registered


def test_the_guard_refuses_a_child_process_in_the_fast_tier():
    guard = TierGuard()
    guard.allowed = frozenset()
    guard.test = "tests/test_x.py::test_y"
    with pytest.MonkeyPatch.context() as patch:
        guard.install(patch)
        with pytest.raises(RuntimeError, match=r"test_y starts a child process \(true\).*children"):
            subprocess.run(["true"], check=False)

        async def spawn() -> None:
            await asyncio.create_subprocess_exec("true")

        with pytest.raises(RuntimeError, match="starts a child process"):
            asyncio.run(spawn())
    assert len(guard.violations) == 2  # kept even where the code under test catches the error


def test_the_guard_refuses_the_local_model_in_the_fast_tier():
    from assay.backends.local import LocalEndpoint

    guard = TierGuard()
    guard.allowed = frozenset({"subprocess"})
    with pytest.MonkeyPatch.context() as patch:
        guard.install(patch)
        with pytest.raises(RuntimeError, match=r"loads the embedded model.*local_model"):
            LocalEndpoint._model(object())  # type: ignore[arg-type]
