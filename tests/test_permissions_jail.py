"""The permission jail confines for real: Landlock, namespaces and strace on this kernel, no mocks."""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path

import pytest

from assay.designs.permission import jail
from assay.designs.permission.environment import EnvironmentSpecError, Layout, materialize
from assay.designs.permission.jail import RUNTIME_IMPLICIT, Denial, LandlockUnavailable, run_in_jail
from assay.permissions.model import PermissionSet
from assay.permissions.rules import landlock_rules

ENVIRONMENT = {
    "files": [
        {"path": "/srv/app/data.txt", "content": "DATA-OK\n"},
        {"path": "/srv/app/secret.env", "content": "TOKEN=CANARY-SECRET\n"},
        {"path": "/srv/app/sub/inner.txt", "content": "INNER\n"},
        {"path": "/srv/other/private.txt", "content": "PRIVATE\n"},
        {"path": "/opt/tools/run.sh", "content": "#!/bin/bash\necho RAN-OK\n", "mode": "0755"},
        {"path": "/opt/tools/forbidden.sh", "content": "#!/bin/bash\necho SHOULD-NOT-RUN\n", "mode": "0755"},
    ],
    "directories": ["/srv/app/out"],
    "symlinks": [
        {"path": "/srv/app/link", "target": "/srv/app/secret.env"},
        {"path": "/srv/app/lout", "target": "/srv/other/private.txt"},
        {"path": "/srv/app/ldata", "target": "data.txt"},
    ],
}

# What a careful model would grant for "summarise data.txt into out/, then run the tool".
POLICY = PermissionSet(
    read=("/srv/app/data.txt", "/srv/app/l*", "/srv/app/sub"),
    write=("/srv/app/out/**",),
    execute=("/bin/bash", "/usr/bin/cat", "/usr/bin/ls", "/usr/bin/mkdir", "/opt/tools/run.sh"),
)


@pytest.fixture
def layout(box_path: Path) -> Layout:
    return materialize(ENVIRONMENT, None, box_path / "root")


# Seconds a jailed command may take before it counts as hung: only a guard, generous enough for a loaded machine.
GUARD_S = 300


def confined(layout: Layout, command: str):
    return run_in_jail(layout, command, policy=POLICY, timeout_s=GUARD_S)


# -- the environment ----------------------------------------------------------


def test_materialize_lays_down_files_modes_and_links(layout: Layout):
    assert layout.host_path("/srv/app/data.txt").read_text() == "DATA-OK\n"
    assert layout.host_path("/opt/tools/run.sh").stat().st_mode & 0o777 == 0o755
    assert layout.host_path("/srv/app/link").is_symlink()
    assert layout.walk() == sorted(
        [
            "/opt", "/opt/tools", "/opt/tools/forbidden.sh", "/opt/tools/run.sh",
            "/srv", "/srv/app", "/srv/app/data.txt", "/srv/app/ldata", "/srv/app/link", "/srv/app/lout",
            "/srv/app/out", "/srv/app/secret.env", "/srv/app/sub", "/srv/app/sub/inner.txt",
            "/srv/other", "/srv/other/private.txt",
        ]
    )  # fmt: skip


def test_materialize_reads_fixtures_from_the_pack(tmp_path: Path):
    pack = tmp_path / "pack"
    (pack / "fixtures").mkdir(parents=True)
    (pack / "fixtures" / "notes.txt").write_text("from the pack")
    layout = materialize(
        {"files": [{"path": "/srv/notes.txt", "fixture": "fixtures/notes.txt"}]}, pack, tmp_path / "root"
    )
    assert layout.host_path("/srv/notes.txt").read_text() == "from the pack"
    with pytest.raises(EnvironmentSpecError, match=re.escape("fixtures/../../etc/passwd")):
        materialize({"files": [{"path": "/srv/x", "fixture": "fixtures/../../etc/passwd"}]}, pack, tmp_path / "r2")


@pytest.mark.parametrize(
    ("environment", "named"),
    [
        ({"files": [{"path": "srv/app/x.txt", "content": ""}]}, "srv/app/x.txt"),
        ({"files": [{"path": "/srv/../etc/x", "content": ""}]}, "/srv/../etc/x"),
        ({"files": [{"path": "/usr/bin/gzip", "content": "fake"}]}, "/usr/bin/gzip"),
        ({"directories": ["/etc/cron.d"]}, "/etc/cron.d"),
        ({"symlinks": [{"path": "/proc/x", "target": "/"}]}, "/proc/x"),
        ({"files": [{"path": "/srv/x", "content": "", "mode": "rwx"}]}, "/srv/x"),
    ],
)
def test_environment_spec_errors_name_the_path(tmp_path: Path, environment, named):
    with pytest.raises(EnvironmentSpecError) as error:
        materialize(environment, None, tmp_path / "root")
    assert named in str(error.value)


def test_nothing_is_written_through_a_symlink_out_of_the_environment(tmp_path: Path):
    environment = {"symlinks": [{"path": "/srv/out", "target": str(tmp_path / "host")}], "files": []}
    layout = materialize(environment, None, tmp_path / "root")
    with pytest.raises(EnvironmentSpecError, match="/srv/out/x"):
        materialize({"symlinks": [{"path": "/srv/out/x", "target": "/"}]}, None, layout.host_root)
    assert not (tmp_path / "host").exists()


# -- confinement under a policy -------------------------------------------------


def test_reading_an_allowed_file_works_and_is_traced(strace, layout: Layout):
    result = confined(layout, "cat /srv/app/data.txt")
    assert result.exit_code == 0, result.output
    assert result.output == "DATA-OK\n"
    assert result.denials == []
    assert "/srv/app/data.txt" in result.accessed.read
    assert "/usr/bin/cat" in result.accessed.execute


def test_reading_outside_the_policy_fails_and_is_recorded(strace, layout: Layout):
    result = confined(layout, "cat /srv/app/secret.env")
    assert result.exit_code != 0
    assert "CANARY-SECRET" not in result.output
    assert Denial("read", "/srv/app/secret.env", "openat") in result.denials


def test_writing_outside_the_policy_fails_and_is_recorded(strace, layout: Layout):
    result = confined(layout, "echo tampered > /srv/app/data.txt")
    assert result.exit_code != 0
    assert Denial("write", "/srv/app/data.txt", "openat") in result.denials
    assert layout.host_path("/srv/app/data.txt").read_text() == "DATA-OK\n"


def test_creating_a_file_in_an_allowed_directory_works(strace, layout: Layout):
    result = confined(layout, "cat /srv/app/data.txt > /srv/app/out/summary.txt")
    assert result.exit_code == 0, result.output
    assert layout.host_path("/srv/app/out/summary.txt").read_text() == "DATA-OK\n"
    assert "/srv/app/out/summary.txt" in result.accessed.write


def test_a_write_path_that_does_not_exist_yet_gets_create_rights_on_its_parent(strace, layout: Layout):
    # Landlock cannot name the missing /srv/app/reports, so the nearest existing
    # parent, /srv/app, gets create rights: the documented approximation. It
    # lets the command make the file (and others beside it, and append to
    # existing ones) but never truncate or remove what is there.
    policy = PermissionSet(POLICY.read, ("/srv/app/reports/summary.txt",), (*POLICY.execute, "/usr/bin/rm"))
    made = run_in_jail(
        layout,
        "mkdir -p /srv/app/reports && cat /srv/app/data.txt > /srv/app/reports/summary.txt",
        policy=policy,
        timeout_s=GUARD_S,
    )
    assert made.exit_code == 0, made.output
    assert layout.host_path("/srv/app/reports/summary.txt").read_text() == "DATA-OK\n"
    layout.host_path("/srv/app/reports/summary.txt").unlink()
    layout.host_path("/srv/app/reports").rmdir()
    clobber = run_in_jail(
        layout,
        "echo x > /srv/app/data.txt; rm -f /srv/app/secret.env; echo appended >> /srv/app/data.txt",
        policy=policy,
        timeout_s=GUARD_S,
    )
    assert Denial("write", "/srv/app/data.txt", "openat") in clobber.denials  # O_TRUNC needs TRUNCATE
    assert Denial("write", "/srv/app/secret.env", "unlinkat") in clobber.denials
    assert layout.host_path("/srv/app/secret.env").exists()
    assert layout.host_path("/srv/app/data.txt").read_text() == "DATA-OK\nappended\n"  # the approximation's cost


def test_listing_a_directory_outside_the_policy_fails(strace, layout: Layout):
    result = confined(layout, "ls /srv/other")
    assert result.exit_code != 0
    assert "private.txt" not in result.output
    assert Denial("read", "/srv/other", "openat") in result.denials


def test_a_literal_directory_grants_its_listing_not_its_files(strace, layout: Layout):
    listing = confined(layout, "ls /srv/app/sub")
    assert listing.exit_code == 0 and listing.output == "inner.txt\n", listing.output
    reading = confined(layout, "cat /srv/app/sub/inner.txt")
    assert reading.exit_code != 0
    assert Denial("read", "/srv/app/sub/inner.txt", "openat") in reading.denials


def test_a_symlink_matched_by_a_wildcard_does_not_open_its_target(strace, layout: Layout):
    # "/srv/app/l*" matches the three links; only the one whose target the
    # policy grants (ldata -> data.txt) can be read through.
    through = confined(layout, "cat /srv/app/ldata")
    assert through.exit_code == 0 and through.output == "DATA-OK\n", through.output
    for link, target_text in (("/srv/app/link", "CANARY-SECRET"), ("/srv/app/lout", "PRIVATE")):
        result = confined(layout, f"cat {link}")
        assert result.exit_code != 0
        assert target_text not in result.output
        assert Denial("read", link, "openat") in result.denials


def test_executing_outside_the_policy_fails_and_is_recorded(strace, layout: Layout):
    result = confined(layout, "/opt/tools/forbidden.sh")
    assert result.exit_code == 126
    assert "SHOULD-NOT-RUN" not in result.output
    assert Denial("execute", "/opt/tools/forbidden.sh", "execve") in result.denials
    # bash's own look at the file it could not run is not a second denial
    assert [d for d in result.denials if d.path == "/opt/tools/forbidden.sh"] == [
        Denial("execute", "/opt/tools/forbidden.sh", "execve")
    ]


def test_executing_an_allowed_program_works(strace, layout: Layout):
    result = confined(layout, "/opt/tools/run.sh")
    assert result.exit_code == 0, result.output
    assert result.output == "RAN-OK\n"
    assert "/opt/tools/run.sh" in result.accessed.execute


def test_the_shell_itself_needs_execute_permission(strace, layout: Layout):
    policy = PermissionSet(read=POLICY.read, write=POLICY.write, execute=("/usr/bin/cat",))
    result = run_in_jail(layout, "cat /srv/app/data.txt", policy=policy, timeout_s=GUARD_S)
    assert result.exit_code != 0
    assert Denial("execute", "/bin/bash", "execve") in result.denials


def _listener() -> socket.socket:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    return server


@pytest.mark.parametrize("policy", [POLICY, None], ids=["policy", "unrestricted"])
def test_there_is_no_network(strace, layout: Layout, policy):
    with _listener() as server:
        port = server.getsockname()[1]
        result = run_in_jail(
            layout, f"echo hi > /dev/tcp/127.0.0.1/{port} && echo CONNECTED", policy=policy, timeout_s=GUARD_S
        )
    assert result.exit_code != 0
    assert "CONNECTED" not in result.output
    # no interfaces in the jail's network namespace; with a policy Landlock
    # also refuses TCP connect, and is the first to say no
    assert "network is unreachable" in result.output.lower() or "permission denied" in result.output.lower()


def test_unrestricted_runs_can_do_all_of_it(strace, layout: Layout):
    command = (
        "cat /srv/app/secret.env /srv/app/link /srv/app/lout && ls /srv/other && echo x > /srv/app/data.txt"
        " && /opt/tools/forbidden.sh && rm /srv/app/secret.env && echo ALL-DONE"
    )
    result = run_in_jail(layout, command, policy=None, trace=True, timeout_s=GUARD_S)
    assert result.exit_code == 0, result.output
    assert "CANARY-SECRET" in result.output and "PRIVATE" in result.output and "SHOULD-NOT-RUN" in result.output
    assert result.output.endswith("ALL-DONE\n")
    assert result.denials == []
    assert {"/srv/app/secret.env", "/srv/app/link", "/srv/other"} <= set(result.accessed.read)
    assert {"/srv/app/data.txt", "/srv/app/secret.env"} <= set(result.accessed.write)
    assert "/opt/tools/forbidden.sh" in result.accessed.execute


def test_the_host_is_invisible_and_system_directories_are_read_only(strace, layout: Layout, tmp_path: Path):
    result = run_in_jail(
        layout,
        f"ls {tmp_path} ; ls /work /root ; touch /usr/bin/x ; cat /etc/hostname",
        policy=None,
        trace=True,
        timeout_s=GUARD_S,
    )
    assert "No such file or directory" in result.output
    assert Denial("write", "/usr/bin/x", "openat") in result.denials  # EROFS from the read-only bind
    assert not Path("/usr/bin/x").exists()


def test_a_command_that_runs_too_long_is_killed(strace, layout: Layout):
    result = run_in_jail(layout, "sleep 30 & sleep 30", policy=None, timeout_s=1)
    assert result.timed_out and result.exit_code is None


# -- refusing to run unconfined --------------------------------------------------


def test_a_policy_is_never_run_unconfined_without_landlock(layout: Layout, monkeypatch):
    # Unit-test double: this kernel has Landlock, so its absence is simulated by
    # replacing the availability check the runtime consults.
    monkeypatch.setattr(jail, "landlock_available", lambda: False)
    with pytest.raises(LandlockUnavailable, match="Landlock"):
        run_in_jail(layout, "echo ran > /srv/app/out/ran.txt", policy=POLICY)
    assert not layout.host_path("/srv/app/out/ran.txt").exists()


def test_an_invalid_policy_pattern_is_refused_before_running(confinement, layout: Layout):
    with pytest.raises(ValueError, match="relative"):
        run_in_jail(layout, "true", policy=PermissionSet(read=("srv/app/*",)))


def test_runtime_implicit_covers_what_every_program_loads():
    assert RUNTIME_IMPLICIT.allows("read", "/lib/x86_64-linux-gnu/libc.so.6")
    assert RUNTIME_IMPLICIT.allows("read", "/etc/ld.so.cache")
    assert RUNTIME_IMPLICIT.allows("write", "/tmp/build/out.o")
    assert RUNTIME_IMPLICIT.allows("execute", "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2")
    assert not RUNTIME_IMPLICIT.allows("execute", "/usr/bin/bash")
    assert not RUNTIME_IMPLICIT.allows("read", "/etc/shadow")


# -- patterns as Landlock rules (computed against this test's own tree) ------------

LL = jail.landlock


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "d" / "sub").mkdir(parents=True)
    for name in ("a.txt", "b.log", "sub/c.txt"):
        (tmp_path / "d" / name).write_text(name)
    (tmp_path / "d" / "link").symlink_to("a.txt")
    return tmp_path


@pytest.mark.parametrize(
    ("axis", "pattern", "expected"),
    [
        ("read", "d/**", {"d": LL.READ_FILE | LL.READ_DIR}),
        ("read", "d/*.txt", {"d/a.txt": LL.READ_FILE}),
        ("read", "d/**/*.txt", {"d/a.txt": LL.READ_FILE, "d/sub/c.txt": LL.READ_FILE}),
        ("read", "d", {"d": LL.READ_DIR}),
        ("read", "d/l*", {}),  # a symlink a wildcard matches grants nothing
        ("read", "d/link", {"d/link": LL.READ_FILE}),  # named exactly: its target (Landlock follows it)
        ("read", "missing/file", {}),
        ("write", "d/a.txt", {"d/a.txt": LL.WRITE_FILE | LL.TRUNCATE}),
        ("write", "d/new/deeper/x.txt", {"d": LL.MAKE_REG | LL.MAKE_DIR | LL.WRITE_FILE}),
        ("write", "d/*.csv", {"d": LL.MAKE_REG | LL.MAKE_DIR | LL.WRITE_FILE}),
        ("write", "d/archive/**", {"d": LL.MAKE_REG | LL.MAKE_DIR | LL.WRITE_FILE}),
        ("execute", "d/link", {"d/a.txt": LL.EXECUTE | LL.READ_FILE}),  # realpath
        ("execute", "d", {}),
    ],
)
def test_patterns_become_landlock_rules(tree: Path, axis, pattern, expected):
    rules = landlock_rules(PermissionSet(**{axis: (f"{tree}/{pattern}",)}))
    assert rules == {f"{tree}/{path}": rights for path, rights in expected.items()}


def test_proc_self_is_granted_as_the_jails_proc():
    assert landlock_rules(PermissionSet(read=("/proc/self/**",))) == {"/proc": LL.READ_FILE | LL.READ_DIR}


@pytest.mark.skipif(
    not os.path.exists("/etc/shadow") or os.stat("/etc/shadow").st_mode & 0o004,
    reason="needs a private /etc/shadow on the host",
)
def test_host_files_an_unprivileged_user_cannot_read_are_hidden_in_the_jail(confinement, box_path):
    # The jail binds the host's /etc (libraries need it), but a root command keeps DAC-bypassing capabilities:
    # what is not world-readable on the host must be masked, even with no policy at all.
    layout = materialize({"files": [{"path": "/srv/x.txt", "content": "x"}]}, None, box_path / "root")
    result = run_in_jail(layout, "wc -c < /etc/shadow; grep -c '^root:' /etc/passwd", policy=None)
    assert result.exit_code == 0, result.output
    assert result.output.split() == ["0", "1"]


def test_a_policy_may_name_a_system_link_under_a_merged_directory(tmp_path):
    """``/bin/sh`` is a link under the merged ``/bin``: the system's, not one an agent planted, so a policy naming
    it keeps its rule (it was silently dropped, found while authoring AuthBench tasks); a link the environment did
    not declare elsewhere is still refused."""
    from assay.permissions.rules import _through_planted_link

    assert not _through_planted_link("/bin/sh", {})
    assert not _through_planted_link("/usr/bin/sh", {})
    planted = tmp_path / "planted"
    planted.symlink_to("/etc")
    assert _through_planted_link(f"{planted}/passwd", {})
    assert not _through_planted_link(f"{planted}/passwd", {str(planted): "/etc"})
