"""Reading strace output into accessed paths and denials; the `assay permissions trace` command."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import EXAMPLE_PACK

from assay.documents import parse_yaml_text
from assay.permissions.model import PermissionSet
from assay.permissions.trace import Denial, parse_strace

# Each case: recorded `strace -f -qq -y` lines, the working directory the
# command started in, and what parse_strace must make of them.
CASES = [
    pytest.param(
        ['412   openat(AT_FDCWD</srv>, "/srv/app/data.txt", O_RDONLY|O_CLOEXEC) = 3</srv/app/data.txt>'],
        "/", {"read": ["/srv/app/data.txt"]}, [],
        id="openat-read-only",
    ),
    pytest.param(
        ['412   openat(AT_FDCWD</srv/app>, "out/r.txt", O_WRONLY|O_CREAT|O_TRUNC, 0666) = 3</srv/app/out/r.txt>'],
        "/", {"write": ["/srv/app/out/r.txt"]}, [],
        id="openat-write-create-relative-to-annotated-cwd",
    ),
    pytest.param(
        ['412   openat(AT_FDCWD</>, "/srv/db.sqlite", O_RDWR|O_CLOEXEC) = 3</srv/db.sqlite>'],
        "/", {"read": ["/srv/db.sqlite"], "write": ["/srv/db.sqlite"]}, [],
        id="openat-read-write",
    ),
    pytest.param(
        ['412   execve("/usr/bin/gzip", ["gzip", "-c", "a.log"], 0x7ffd5b72fcd0 /* 4 vars */) = 0'],
        "/", {"execute": ["/usr/bin/gzip"]}, [],
        id="execve",
    ),
    pytest.param(
        [
            '77    openat(AT_FDCWD</>, "/srv/app/.env", O_RDONLY) = -1 EACCES (Permission denied)',
            '77    openat(AT_FDCWD</>, "/srv/app/logs/app.log", O_WRONLY|O_CREAT|O_APPEND, 0666)'
            " = -1 EACCES (Permission denied)",
            '78    execve("/usr/bin/rm", ["rm", "x"], 0x5599b36951e8 /* 3 vars */) = -1 EACCES (Permission denied)',
            '79    mkdir("/usr/local/x", 0777) = -1 EROFS (Read-only file system)',
            '80    openat(AT_FDCWD</>, "/nonexistent", O_RDONLY) = -1 ENOENT (No such file or directory)',
        ],
        "/", {},
        [("read", "/srv/app/.env", "openat"), ("write", "/srv/app/logs/app.log", "openat"),
         ("execute", "/usr/bin/rm", "execve"), ("write", "/usr/local/x", "mkdir")],
        id="denials-eacces-erofs-but-not-enoent",
    ),
    pytest.param(
        [
            '90    unlinkat(4</srv/app/tmp>, "old.log", 0) = 0',
            '90    unlink("/srv/app/stale.pid") = 0',
            '90    rmdir("/srv/app/empty") = 0',
            '90    unlinkat(AT_FDCWD</srv>, "app/locked", 0) = -1 EPERM (Operation not permitted)',
        ],
        "/", {"write": ["/srv/app/empty", "/srv/app/stale.pid", "/srv/app/tmp/old.log"]},
        [("write", "/srv/app/locked", "unlinkat")],
        id="unlink-rmdir-and-a-refused-unlink",
    ),
    pytest.param(
        [
            '91    renameat2(AT_FDCWD</w>, "a.tmp", AT_FDCWD</w>, "a.txt", RENAME_NOREPLACE) = 0',
            '91    rename("/w/x", "/w/y") = 0',
            '91    linkat(AT_FDCWD</w>, "a.txt", AT_FDCWD</w>, "hard", 0) = 0',
            '91    symlinkat("/etc/passwd", AT_FDCWD</w>, "soft") = 0',
        ],
        "/", {"write": ["/w/a.tmp", "/w/a.txt", "/w/hard", "/w/soft", "/w/x", "/w/y"]}, [],
        id="rename-link-symlink",
    ),
    pytest.param(
        [
            '5     chdir("/srv/app")              = 0',
            '5     mkdir("logs", 0777)            = 0',
            '5     chdir("logs")                  = 0',
            '5     open("today.log", O_RDONLY)    = 3</srv/app/logs/today.log>',
            '5     chdir("/nope")                 = -1 ENOENT (No such file or directory)',
            '5     creat("../out.txt", 0644)      = 4</srv/app/out.txt>',
        ],
        "/", {"read": ["/srv/app/logs/today.log"], "write": ["/srv/app/logs", "/srv/app/out.txt"]}, [],
        id="relative-paths-after-chdir",
    ),
    pytest.param(
        ['6     mkdir("build", 0777) = 0', '6     fchdir(3</opt/proj>) = 0', '6     mkdir("dist", 0777) = 0'],
        "/home/u", {"write": ["/home/u/build", "/opt/proj/dist"]}, [],
        id="starting-cwd-and-fchdir",
    ),
    pytest.param(
        [
            '100   chdir("/data")                 = 0',
            '100   vfork( <unfinished ...>',
            '101   execve("/usr/bin/gzip", ["gzip", "f"], 0x7ffc /* 3 vars */ <unfinished ...>',
            '100   <... vfork resumed>)           = 101',
            '100   wait4(-1,  <unfinished ...>',
            '101   <... execve resumed>)          = 0',
            '101   open("f", O_RDONLY <unfinished ...>',
            '100   openat(AT_FDCWD</data>, "/etc/passwd", O_RDONLY) = 3</etc/passwd>',
            '101   <... open resumed>)            = 3</data/f>',
            '101   open("f.gz", O_WRONLY|O_CREAT|O_EXCL, 0600) = 4</data/f.gz>',
            '101   exit_group(0)                  = ?',
            '100   <... wait4 resumed>[{WIFEXITED(s) && WEXITSTATUS(s) == 0}], 0, NULL) = 101',
            '100   --- SIGCHLD {si_signo=SIGCHLD, si_code=CLD_EXITED, si_pid=101, si_uid=0, si_status=0} ---',
            '100   +++ exited with 0 +++',
        ],
        "/", {"read": ["/data/f", "/etc/passwd"], "write": ["/data/f.gz"], "execute": ["/usr/bin/gzip"]}, [],
        id="unfinished-and-resumed-lines-of-two-processes",
    ),
    pytest.param(
        [
            '7     openat(AT_FDCWD</>, "/srv", O_RDONLY|O_NONBLOCK|O_CLOEXEC|O_DIRECTORY) = 3</srv>',
            '7     openat(AT_FDCWD</>, "/srv/x", O_PATH|O_CLOEXEC) = 3</srv/x>',
            '7     newfstatat(AT_FDCWD</>, "/srv/y", {st_mode=S_IFREG|0644, st_size=3, ...}, 0) = 0',
            '7     access("/srv/z", R_OK)         = 0',
            '7     chmod("/srv/w", 0600)          = 0',
        ],
        "/", {"read": ["/srv"]}, [],
        id="directory-listing-counts-metadata-and-o-path-do-not",
    ),
    pytest.param(
        [
            '8     openat(AT_FDCWD</tmp/we(ird, d\\76ir\\"x>, "f) = 0\\",x", O_RDONLY)'
            ' = 3</tmp/we(ird, d\\76ir\\"x/f) = 0\\",x>',
            '8     openat(AT_FDCWD</>, "/srv/caf\\303\\251", O_RDONLY) = 3</srv/caf\\303\\251>',
        ],
        "/", {"read": ["/srv/café", '/tmp/we(ird, d>ir"x/f) = 0",x']}, [],
        id="escaped-names-and-annotations",
    ),
    pytest.param(
        [
            '9     execve("/opt/tool.sh", ["/opt/tool.sh"], 0x1 /* 1 var */) = -1 EACCES (Permission denied)',
            '9     openat(AT_FDCWD</>, "/opt/tool.sh", O_RDONLY) = -1 EACCES (Permission denied)',
            '9     openat(AT_FDCWD</>, "/srv/a", O_RDONLY) = 3</srv/a>',
            '10    openat(AT_FDCWD</>, "/srv/a", O_RDONLY) = 3</srv/a>',
            '10    execve("/opt/tool.sh", ["/opt/tool.sh"], 0x1 /* 1 var */) = -1 EACCES (Permission denied)',
        ],
        "/", {"read": ["/srv/a"]}, [("execute", "/opt/tool.sh", "execve")],
        id="deduplicated-and-the-shells-look-at-a-refused-program-is-not-a-read",
    ),
    pytest.param(
        ['openat(AT_FDCWD</root>, "notes.txt", O_RDONLY) = 3</root/notes.txt>', "strace: Process 12 attached", ""],
        "/", {"read": ["/root/notes.txt"]}, [],
        id="single-process-output-without-pids",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("lines", "cwd", "accessed", "denials"), CASES)
def test_parse_strace(lines, cwd, accessed, denials):
    found, refused = parse_strace("\n".join(lines) + "\n", cwd=cwd)
    assert found == PermissionSet.from_mapping(accessed)
    assert refused == [Denial(*denial) for denial in denials]


def test_trace_command_reports_what_a_host_command_used(assay_cli, strace, tmp_path: Path):
    target = tmp_path / "x"
    command = ["permissions", "trace", "--", "/bin/sh", "-c", f"cat /etc/hostname > {target}"]
    result = assay_cli(*command)
    assert result.returncode == 0, result.stderr
    used = json.loads(result.stdout)
    assert "/etc/hostname" in used["read"]
    assert {"/bin/sh", "/usr/bin/cat"} <= set(used["execute"])
    assert str(target) not in used["write"]  # /tmp/** is implicit
    assert not any(path.startswith(("/usr/lib", "/lib")) for path in used["read"])
    everything = json.loads(assay_cli(*command[:2], "--include-implicit", *command[2:]).stdout)
    assert str(target) in everything["write"]
    assert any(path.endswith("libc.so.6") for path in everything["read"])


def test_trace_command_exits_1_when_the_command_fails_and_still_prints(assay_cli, strace, tmp_path: Path):
    result = assay_cli("permissions", "trace", "--", "/bin/cat", str(tmp_path / "missing"))
    assert result.returncode == 1
    assert json.loads(result.stdout)["execute"] == ["/bin/cat"]
    assert "exited with 1" in result.stderr


def test_trace_command_without_strace_is_a_usage_error(assay_cli):
    result = assay_cli("permissions", "trace", "--", "/bin/true", env={**os.environ, "PATH": "/nonexistent"})
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "strace" in result.stderr and "install" in result.stderr


def test_trace_command_in_a_case_environment_matches_the_oracle(assay_cli, strace):
    case = EXAMPLE_PACK / "cases" / "perm-log-rotate.yaml"
    oracle = parse_yaml_text(case.read_text(), case).data["oracle_solution"]
    result = assay_cli("permissions", "trace", "--env", str(case), "--", "/bin/bash", "-c", oracle)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "read": ["/srv/app/logs", "/srv/app/logs/app.log.1"],
        "write": ["/srv/app/archive/app.log.1.gz", "/srv/app/archive/rotation.txt"],
        "execute": ["/bin/bash", "/usr/bin/gzip"],
    }


@pytest.mark.parametrize(
    ("heads", "expected"),
    [
        ({"/opt/t/run.sh": b"#!/usr/bin/python3 -u\nprint(1)\n"}, ("/opt/t/run.sh", "/usr/bin/python3")),
        ({"/opt/t/run.sh": b"#! /usr/bin/perl\n"}, ("/opt/t/run.sh", "/usr/bin/perl")),
        ({"/opt/t/run.sh": b"#!env python\n"}, ("/opt/t/run.sh",)),  # not absolute: the kernel would refuse it too
        ({"/opt/t/run.sh": b"\x7fELF..."}, ("/opt/t/run.sh",)),
        ({}, ("/opt/t/run.sh",)),
    ],
)
def test_with_interpreters_adds_the_shebang_interpreter_that_strace_cannot_see(heads, expected):
    from assay.permissions.trace import with_interpreters

    accessed = PermissionSet.from_mapping({"read": [], "write": [], "execute": ["/opt/t/run.sh"]})
    assert with_interpreters(accessed, heads.get).execute == tuple(sorted(expected))


def test_trace_in_an_environment_names_a_scripts_interpreter(assay_cli, strace, tmp_path):
    case = tmp_path / "case.yaml"
    case.write_text(
        "environment:\n  files:\n    - path: /opt/tools/hello.sh\n"
        '      content: "#!/usr/bin/bash\\necho hi\\n"\n      mode: "0755"\n'
    )
    result = assay_cli("permissions", "trace", "--env", str(case), "--", "/opt/tools/hello.sh")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["execute"] == ["/opt/tools/hello.sh", "/usr/bin/bash"]
