"""One exception hierarchy: every error assay raises on purpose is an AssayError, and the CLI prints one line for it."""

from __future__ import annotations

import errno

import click
import pytest

import assay.cli
from assay import errors, hookimpl
from assay.backends import _http
from assay.designs.permission import environment, jail
from assay.documents import DocumentError
from assay.engine import messages
from assay.permissions import trace
from assay.plugins import load_plugins
from assay.sandboxes import landlock

# Each error where its users import it from, with how it is built and the exit status the CLI gives it.
RAISED = [
    (jail.JailError, ("cannot build the jail: mount /proc: Operation not permitted",), 1),
    (jail.LandlockUnavailable, ("this kernel has no Landlock support",), 1),
    (trace.StraceNotFound, ("strace is not installed (apt-get install strace)",), 1),
    (environment.EnvironmentSpecError, ("file path 'etc/x' is relative; environment paths must be absolute",), 1),
    (DocumentError, ("malformed YAML: mapping values are not allowed here", 3), 1),
    (landlock.LandlockError, (errno.EPERM, "landlock_restrict_self failed"), 1),
    (messages.BackendError, ("connection refused (gave up after 6 attempts)",), 1),
    (_http.TransportTimeout, ("timeout",), 1),
    (_http.TransportFailure, ("connection reset by peer",), 1),
    (errors.UsageError, ("--concurrency must be at least 1",), 2),
    (errors.PackError, ("no pack manifest",), 1),
]


@pytest.mark.parametrize(("error", "args", "status"), RAISED, ids=[e.__name__ for e, _, _ in RAISED])
def test_every_error_is_an_assay_error_with_its_exit_status(error, args, status):
    raised = error(*args)
    assert isinstance(raised, errors.AssayError)
    assert raised.exit_code == status
    # One class, wherever it is imported from.
    assert getattr(errors, error.__name__) is error


def test_builtin_bases_are_kept_for_callers_that_catch_them():
    assert issubclass(errors.DocumentError, ValueError)
    assert issubclass(errors.EnvironmentSpecError, ValueError)
    assert issubclass(errors.LandlockError, OSError)
    assert errors.LandlockError(errno.EPERM, "x").errno == errno.EPERM


def test_the_hierarchy_is_drawn_in_the_module_docstring():
    for name in errors.__all__:
        assert name in errors.__doc__, f"{name} is missing from the drawing in assay/errors.py"
        assert issubclass(getattr(errors, name), errors.AssayError)


class _Raiser:
    """Test double: a plugin whose one command raises the error it is given."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    @hookimpl
    def register_commands(self, register) -> None:
        @click.command("explode")
        def explode() -> None:
            """Raise the error under test."""
            raise self.error

        register(explode)


def _run_with(monkeypatch, capsys, error: BaseException, *args: str) -> tuple[int, str, str]:
    def host_with_raiser(**kwargs):
        host = load_plugins(environ={"ASSAY_DISABLE_PLUGIN_AUTOLOAD": "1"})
        host.register(_Raiser(error), "raiser")
        return host

    monkeypatch.setattr(assay.cli, "load_plugins", host_with_raiser)
    monkeypatch.delenv("ASSAY_TRACEBACK", raising=False)
    code = assay.cli.main([*args, "explode"])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(("error", "args", "status"), RAISED, ids=[e.__name__ for e, _, _ in RAISED])
def test_the_cli_prints_one_line_and_the_errors_exit_status(monkeypatch, capsys, error, args, status):
    code, out, err = _run_with(monkeypatch, capsys, error(*args))
    assert code == status
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("assay: usage: " if status == 2 else "assay: error: ")
    assert "Traceback" not in err


def test_a_multi_line_message_becomes_one_line(monkeypatch, capsys):
    helper_stderr = "cannot build the jail: mount failed\n  detail one\n  detail two\n"
    code, _, err = _run_with(monkeypatch, capsys, jail.JailError(helper_stderr))
    assert code == 1
    assert err == "assay: error: cannot build the jail: mount failed (and 2 more lines; --traceback shows all)\n"


def test_an_os_error_names_the_file(monkeypatch, capsys, tmp_path):
    missing = tmp_path / "nope.json"
    code, _, err = _run_with(
        monkeypatch, capsys, FileNotFoundError(errno.ENOENT, "No such file or directory", str(missing))
    )
    assert code == 1
    assert err == f"assay: error: {missing}: No such file or directory\n"


def test_traceback_switch_re_raises(monkeypatch, capsys):
    with pytest.raises(jail.JailError):
        _run_with(monkeypatch, capsys, jail.JailError("boom"), "--traceback")
