"""Attacks from inside a box: the kernel, the host's processes and files, the network, limits, descriptors.

Every attack runs as an agent's code would (``code_run`` in a workspace box,
or a command in the permission jail) and is bounded so that it cannot hurt
this machine even if the confinement it tests were broken: bombs stop by
themselves after a few hundred processes or a few hundred megabytes.
"""

from __future__ import annotations

import os
import socket
import textwrap
import time
from pathlib import Path

import pytest

from assay.designs.permission.environment import materialize
from assay.designs.permission.jail import RUNTIME_IMPLICIT, run_in_jail
from assay.permissions.model import PermissionSet
from assay.sandboxes.runner import run_confined

pytestmark = pytest.mark.usefixtures("confinement")


def _python(workspace: Path, code: str, timeout_s: float = 30.0, **limits: int) -> tuple[int | None, str]:
    return run_confined(workspace, ["python", "-c", textwrap.dedent(code)], timeout_s=timeout_s, limits=limits)


def _shell(workspace: Path, script: str, timeout_s: float = 30.0) -> tuple[int | None, str]:
    return run_confined(workspace, ["/bin/sh", "-c", script], timeout_s=timeout_s)


# -- the kernel --------------------------------------------------------------------------------------------------


def test_proc_sys_is_read_only_and_the_host_core_pattern_is_untouched(box_path):
    before = Path("/proc/sys/kernel/core_pattern").read_text()
    _code, output = _shell(box_path, "echo '|/tmp/pwn' > /proc/sys/kernel/core_pattern; echo rc=$?")
    assert "rc=0" not in output
    assert Path("/proc/sys/kernel/core_pattern").read_text() == before


def test_sysrq_and_other_proc_writes_fail(box_path):
    _code, output = _shell(
        box_path,
        "for f in /proc/sysrq-trigger /proc/sys/vm/drop_caches /proc/sys/kernel/hostname; "
        "do (echo 1 > $f) 2>/dev/null && echo WROTE $f; done; echo done",
    )
    assert "WROTE" not in output and "done" in output


def test_mounting_is_refused(box_path):
    _code, output = _shell(box_path, "mount -t tmpfs none /tmp 2>&1; echo rc=$?")
    assert "rc=0" not in output


def test_nested_user_namespaces_are_refused(box_path):
    _code, output = _python(
        box_path,
        """
        import ctypes, errno
        libc = ctypes.CDLL(None, use_errno=True)
        print("unshare", libc.unshare(0x10000000), errno.errorcode.get(ctypes.get_errno()))
        """,
    )
    assert "unshare -1" in output


@pytest.mark.parametrize(
    ("name", "call"),
    [
        ("keyctl", "libc.syscall(250, 0, 0, 0, 0, 0)"),
        ("add_key", "libc.syscall(248, b'user', b'x', b'y', 1, -3)"),
        ("clone_untraced", "libc.syscall(56, 0x00800000 | 17, 0, 0, 0, 0)"),
        ("io_uring", "libc.syscall(425, 1, 0)"),
        ("bpf", "libc.syscall(321, 0, 0, 0)"),
        ("perf_event_open", "libc.syscall(298, 0, 0, -1, -1, 0)"),
    ],
)
def test_refused_system_calls(box_path, name, call):
    if os.uname().machine != "x86_64":
        pytest.skip("system call numbers here are x86-64's")
    _code, output = _python(
        box_path,
        f"""
        import ctypes, errno
        libc = ctypes.CDLL(None, use_errno=True)
        result = {call}
        print("RESULT", result, errno.errorcode.get(ctypes.get_errno()))
        """,
    )
    assert "RESULT -1" in output, output


def test_setuid_programs_give_no_privilege(box_path):
    _code, output = _shell(box_path, "grep NoNewPrivs /proc/self/status; su -c id root 2>&1 | head -1; id -u")
    assert "NoNewPrivs:\t1" in output


# -- host processes, files, identity -------------------------------------------------------------------------------


def test_host_processes_are_invisible_and_cannot_be_signalled(box_path):
    me = os.getpid()
    _code, output = _shell(box_path, f"ls /proc | grep -c '^[0-9]'; kill -0 {me} 2>&1; echo rc=$?; kill -9 1 2>&1")
    count = int(output.split()[0])
    assert count < 10  # the box's own few processes, never the host's hundreds
    assert "rc=0" not in output


def test_the_engine_environment_never_reaches_the_box(box_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-HOST-SECRET-4411")
    _code, output = _shell(box_path, "env; cat /proc/1/environ 2>&1 | tr '\\0' '\\n'")
    assert "sk-HOST-SECRET-4411" not in output


def test_the_box_runs_as_nobody_on_the_host(box_path):
    marker = "made-by-box.txt"
    _code, _output = _shell(box_path, f"echo x > {marker}; id -u")
    assert (box_path / marker).stat().st_uid != 0


def test_shadow_files_are_empty_in_the_box(box_path):
    _code, output = _shell(box_path, "wc -c < /etc/shadow; wc -c < /etc/gshadow")
    assert output.split() == ["0", "0"]


@pytest.mark.parametrize("path", ["/root", "/work", "/home", "/var", "/srv", "/tmp/pytest-of-root"])
def test_host_trees_are_not_in_the_box(box_path, path):
    _code, output = _shell(box_path, f"ls -A {path} 2>/dev/null | wc -l")
    assert output.split() == ["0"]  # absent (or, for /tmp, the box's own empty one)


def test_system_directories_are_read_only(box_path):
    _code, _output = _shell(box_path, "touch /usr/pwn 2>&1; touch /etc/pwn 2>&1; echo done")
    assert not Path("/usr/pwn").exists() and not Path("/etc/pwn").exists()


def test_a_hard_link_to_a_system_file_cannot_be_made(box_path):
    _code, output = _shell(box_path, "ln /etc/passwd hard 2>&1; echo rc=$?")
    assert "rc=0" not in output and not (box_path / "hard").exists()


def test_no_device_nodes_can_be_made(box_path):
    _code, output = _shell(box_path, "mknod mem c 1 1 2>&1; echo rc=$?; ls /dev")
    assert "rc=0" not in output and "mem" not in output.split()


def test_only_standard_descriptors_are_inherited(box_path):
    _code, output = _python(box_path, "import os; print(sorted(int(fd) for fd in os.listdir('/proc/self/fd')))")
    assert output.strip().endswith("[0, 1, 2, 3]")  # 3: listdir's own directory


def test_hostname_changes_stay_in_the_box(box_path):
    before = socket.gethostname()
    _shell(box_path, "hostname pwned 2>&1")
    assert socket.gethostname() == before


# -- the network ------------------------------------------------------------------------------------------------


def test_no_tcp_to_a_host_listener(box_path):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        _code, output = _python(
            box_path,
            f"""
            import socket
            try:
                socket.create_connection(("127.0.0.1", {port}), timeout=2); print("CONNECTED")
            except OSError as exc:
                print("refused", exc)
            """,
        )
    assert "CONNECTED" not in output


def test_no_udp_out(box_path):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as server:
        server.bind(("127.0.0.1", 0))
        server.settimeout(0.5)
        port = server.getsockname()[1]
        _python(
            box_path,
            f"""
            import socket
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            try:
                s.sendto(b"LEAK", ("127.0.0.1", {port}))
            except OSError:
                pass
            """,
        )
        with pytest.raises(TimeoutError):
            server.recv(16)


def test_no_abstract_unix_socket_of_the_host(box_path):
    name = f"\0assay-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(name)
        server.listen()
        _code, output = _python(
            box_path,
            f"""
            import socket
            s = socket.socket(socket.AF_UNIX)
            try:
                s.connect({name!r}); print("CONNECTED")
            except OSError as exc:
                print("refused", exc)
            """,
        )
    assert "CONNECTED" not in output


def test_no_pathname_unix_socket_of_the_host(box_path, tmp_path):
    path = tmp_path / "host.sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        server.listen()
        _code, output = _python(
            box_path,
            f"""
            import socket
            s = socket.socket(socket.AF_UNIX)
            try:
                s.connect({str(path)!r}); print("CONNECTED")
            except OSError as exc:
                print("refused", exc)
            """,
        )
    assert "CONNECTED" not in output


# -- processes and limits (every bomb stops by itself) ----------------------------------------------------------


def test_a_daemon_does_not_outlive_the_box(box_path, tmp_path):
    canary = tmp_path / "daemon-canary"
    _code, _output = _python(
        box_path,
        f"""
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(2)
                for path in ("daemon-alive", {str(canary)!r}):
                    try:
                        open(path, "w").write("alive")
                    except OSError:
                        pass
                os._exit(0)
            os._exit(0)
        print("parent done")
        """,
    )
    time.sleep(3)
    assert not (box_path / "daemon-alive").exists() and not canary.exists()


def test_a_fork_bomb_is_bounded(box_path):
    _code, output = _python(
        box_path,
        """
        import os, time
        children = 0
        for _ in range(300):          # bounded even without the box
            try:
                if os.fork() == 0:
                    time.sleep(120); os._exit(0)  # alive until the box ends, however slow forking is
                children += 1
            except OSError:
                break
        print("CHILDREN", children)
        """,
        processes=32,
    )
    assert int(output.split("CHILDREN")[1].split()[0]) < 32


def test_a_memory_bomb_is_bounded(box_path):
    _code, output = _python(box_path, "x = bytearray(3 * 1024**3); print('ALLOCATED')", memory_mb=256)
    assert "ALLOCATED" not in output


def test_a_file_size_bomb_is_bounded(box_path):
    _code, _output = _python(
        box_path,
        """
        import os
        written = 0
        try:
            with open("big", "wb") as handle:
                for _ in range(200):                # at most 200 MiB even without limits
                    handle.write(b"x" * (1 << 20)); handle.flush(); written += 1
        except OSError as exc:
            print("stopped", exc)
        print("MIB", written)
        """,
        file_mb=8,
    )
    assert (box_path / "big").stat().st_size <= 8 << 20


def test_the_private_tmp_is_small(box_path):
    _code, output = _python(
        box_path,
        """
        written = 0
        try:
            with open("/tmp/fill", "wb") as handle:
                for _ in range(100):                # at most 100 MiB even without limits
                    handle.write(b"x" * (1 << 20)); handle.flush(); written += 1
        except OSError as exc:
            print("stopped", exc.errno)
        print("MIB", written)
        """,
        tmp_mb=16,
        file_mb=128,
    )
    assert int(output.split("MIB")[1].split()[0]) <= 16


def test_the_deadline_kills_the_whole_tree(box_path, tmp_path):
    started = time.monotonic()
    code, _output = _shell(box_path, "(sleep 300; echo late > late.txt) & (sleep 300) & sleep 300", timeout_s=2)
    # Without the kill the call would last the 300 s of the sleeps: anything shorter means the deadline ended them,
    # however loaded the machine is.
    assert code is None and time.monotonic() - started < 290
    time.sleep(1)
    assert not (box_path / "late.txt").exists()


def test_output_flooding_is_bounded(box_path):
    _code, output = _python(box_path, "import sys\nfor _ in range(300000): sys.stdout.write('y' * 100)", timeout_s=60)
    assert len(output) < 2 << 20 and "bytes of output dropped" in output


# -- the permission jail's record -------------------------------------------------------------------------------


@pytest.fixture
def jail_layout(box_path):
    return materialize(
        {
            "files": [
                {"path": "/srv/app/data.txt", "content": "DATA\n"},
                {"path": "/srv/app/.env", "content": "K=V\n"},
            ],
            "directories": ["/srv/app/out"],
        },
        None,
        box_path / "root",
    )


POLICY = PermissionSet(
    read=("/srv/app/data.txt",),
    write=("/srv/app/out/**",),
    execute=("/bin/bash", "/usr/bin/cat", "/usr/bin/python3*", "/usr/bin/ls"),
)


def test_forged_trace_lines_do_not_become_denials(strace, jail_layout):
    forged = '4242 openat(AT_FDCWD</>, "/forged/denial", O_RDONLY) = -1 EACCES (Permission denied)'
    script = (
        f"for fd in /proc/*/fd/*; do echo '{forged}' > $fd 2>/dev/null; done; "
        f"echo '{forged}' >&2; cat /srv/app/data.txt"
    )
    result = run_in_jail(jail_layout, script, policy=POLICY)
    assert all(denial.path != "/forged/denial" for denial in result.denials)


def test_an_untraced_clone_is_refused_and_accesses_stay_recorded(strace, jail_layout):
    code = (
        "import ctypes, errno, os; libc = ctypes.CDLL(None, use_errno=True); "
        "r = libc.syscall(56, 0x00800000 | 17, 0, 0, 0, 0); "
        "os._exit(0) if r == 0 else None; "
        "print('CLONE', r, errno.errorcode.get(ctypes.get_errno())); "
        "open('/srv/app/.env').read()"
    )
    policy = PermissionSet(read=POLICY.read, write=POLICY.write, execute=(*POLICY.execute, "/usr/lib/python3*/**"))
    result = run_in_jail(jail_layout, ["/usr/bin/python3", "-I", "-c", code], policy=policy.union(RUNTIME_IMPLICIT))
    assert "CLONE -1" in result.output
    assert any(d.path == "/srv/app/.env" and d.op == "read" for d in result.denials)


def test_a_child_process_denial_is_recorded(strace, jail_layout):
    result = run_in_jail(jail_layout, "bash -c 'cat /srv/app/.env' ; (cat /srv/app/.env) ; true", policy=POLICY)
    assert [d for d in result.denials if d.path == "/srv/app/.env"]


def test_the_tracer_cannot_be_killed_from_the_box(strace, jail_layout):
    result = run_in_jail(jail_layout, "kill -9 -1 2>&1; cat /srv/app/.env; true", policy=POLICY)
    assert any(d.path == "/srv/app/.env" for d in result.denials)


def test_a_write_pattern_under_the_root_grants_nothing_above_the_tasks_tree(strace, jail_layout):
    policy = PermissionSet(write=("/new-top-level/file.txt",), execute=("/bin/bash",))
    result = run_in_jail(
        jail_layout, "echo x > /pwned.txt; echo y > /new-top-level-file", policy=policy, create_within=("/srv/app",)
    )
    assert not (jail_layout.host_root / "pwned.txt").exists()
    assert not (jail_layout.host_root / "new-top-level-file").exists()
    assert any(d.op == "write" for d in result.denials)


@pytest.mark.parametrize(("family", "kind"), [(40, 1), (17, 3), (31, 5), (38, 5)])  # vsock, packet, bluetooth, alg
def test_socket_families_no_namespace_confines_are_refused(box_path, family, kind):
    _code, output = _python(
        box_path,
        f"""
        import socket
        try:
            socket.socket({family}, {kind}, 0); print("CREATED")
        except OSError as exc:
            print("refused", exc.errno)
        """,
    )
    assert "CREATED" not in output and "refused" in output


def test_the_disk_a_work_item_can_fill_is_bounded(monkeypatch):
    """Many files, each under the per-file limit, still stop at the item's disk budget (a tmpfs, as root)."""
    from assay.sandboxes.box import box_dir, remove_box_dir

    if os.geteuid() != 0:
        pytest.skip("the aggregate disk budget is a tmpfs, which needs root (see docs/threat-model.md)")
    monkeypatch.setenv("ASSAY_BOX_DISK_MB", "32")
    workspace = box_dir("assay-disk-test-")
    try:
        _code, output = _python(
            workspace,
            """
            written = 0
            try:
                for number in range(20):                 # at most 160 MiB even without the budget
                    with open(f"fill{number}", "wb") as handle:
                        handle.write(b"x" * (8 << 20)); written += 8
            except OSError as exc:
                print("stopped", exc.errno)
            print("MIB", written)
            """,
            file_mb=8,
        )
        assert "stopped 28" in output  # ENOSPC
        assert int(output.split("MIB")[1].split()[0]) <= 32
    finally:
        remove_box_dir(workspace)
    assert not workspace.exists()
