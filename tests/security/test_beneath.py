"""Attacks on the engine's own file access: links, special files, path tricks and sizes in an agent's tree.

Each test plants what a confined agent could leave in its workspace and checks
that the engine's access (:class:`assay.sandboxes.beneath.Beneath`) refuses it
and that the host file the attack aimed at is untouched. Every test runs twice:
with ``openat2`` and with the component walk used on kernels without it.
"""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest
from attacks import finishes

from assay.sandboxes import beneath
from assay.sandboxes.beneath import Beneath, UnsafePath


@pytest.fixture(params=["openat2", "walk"])
def tree(request, tmp_path: Path, monkeypatch) -> Path:
    """A sandbox root with a regular file, and a host canary outside it."""
    if request.param == "walk":
        monkeypatch.setattr(beneath, "_HAS_OPENAT2", False)
    elif not beneath.openat2_available():
        pytest.skip("this kernel has no openat2")
    root = tmp_path / "box"
    (root / "work").mkdir(parents=True)
    (root / "work" / "ok.txt").write_text("fine")
    (tmp_path / "host-secret.txt").write_text("HOST-CANARY")
    return root


def _host(root: Path) -> Path:
    return root.parent / "host-secret.txt"


def test_a_regular_file_reads(tree):
    with Beneath(tree) as box:
        assert box.read_text("/work/ok.txt") == "fine"
        assert box.read_text("work/ok.txt") == "fine"


@pytest.mark.parametrize("target", ["{host}", "/etc/shadow", "/proc/self/environ", "/proc/1/root/etc/passwd"])
def test_a_symlink_to_anything_is_not_followed(tree, target):
    (tree / "work" / "link").symlink_to(target.format(host=_host(tree)))
    with Beneath(tree) as box, pytest.raises(UnsafePath):
        box.read_text("/work/link")


def test_a_relative_symlink_inside_the_root_is_not_followed_either(tree):
    (tree / "work" / "alias").symlink_to("ok.txt")
    with Beneath(tree) as box, pytest.raises(UnsafePath):
        box.read_text("/work/alias")


def test_a_symlinked_directory_in_the_middle_is_refused(tree):
    (tree / "work" / "up").symlink_to(tree.parent)
    with Beneath(tree) as box, pytest.raises(UnsafePath):
        box.read_text("/work/up/host-secret.txt")


def test_a_magic_link_is_refused(tree):
    (tree / "work" / "me").symlink_to("/proc/self/root")
    with Beneath(tree) as box, pytest.raises(UnsafePath):
        box.read_text("/work/me/etc/hostname")


@pytest.mark.parametrize("path", ["../host-secret.txt", "/work/../../host-secret.txt", "work/./../.."])
def test_dot_dot_is_refused(tree, path):
    with Beneath(tree) as box, pytest.raises(UnsafePath):
        box.read_text(path)


def test_a_fifo_is_refused_without_blocking(tree):
    os.mkfifo(tree / "work" / "pipe")
    with Beneath(tree) as box, pytest.raises(UnsafePath, match="not a regular file"):
        finishes(box.read_text, "/work/pipe")  # a blocking open would hang here forever


def test_a_device_node_is_refused(tree):
    if os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    os.mknod(tree / "work" / "zero", 0o666 | stat.S_IFCHR, os.makedev(1, 5))
    with Beneath(tree) as box, pytest.raises(UnsafePath, match="not a regular file"):
        box.read_bytes("/work/zero")


def test_a_unix_socket_is_refused(tree):
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(tree / "work" / "sock"))
        with Beneath(tree) as box, pytest.raises((UnsafePath, OSError)):
            box.read_text("/work/sock")


def test_a_hard_link_is_refused_for_reading_and_replaced_not_written_through(tree):
    os.link(_host(tree), tree / "work" / "hard")
    with Beneath(tree) as box:
        with pytest.raises(UnsafePath, match="hard links"):
            box.read_text("/work/hard")
        box.write_text("/work/hard", "agent text")
    assert _host(tree).read_text() == "HOST-CANARY"
    assert (tree / "work" / "hard").read_text() == "agent text"


def test_a_file_over_the_limit_is_refused(tree):
    (tree / "work" / "big").write_bytes(b"x" * 5000)
    with Beneath(tree) as box, pytest.raises(UnsafePath, match="larger than 4096"):
        box.read_bytes("/work/big", limit=4096)


def test_writing_through_a_final_symlink_never_touches_its_target(tree):
    (tree / "work" / "out").symlink_to(_host(tree))
    with Beneath(tree) as box, pytest.raises(UnsafePath):
        box.write_text("/work/out", "overwritten")
    assert _host(tree).read_text() == "HOST-CANARY"


def test_writing_below_a_symlinked_directory_is_refused(tree):
    (tree / "work" / "away").symlink_to(tree.parent)
    with Beneath(tree) as box, pytest.raises(UnsafePath):
        box.write_text("/work/away/host-secret.txt", "overwritten")
    with Beneath(tree) as box, pytest.raises(UnsafePath):
        box.write_text("/work/away/new.txt", "planted")
    assert _host(tree).read_text() == "HOST-CANARY"
    assert not (tree.parent / "new.txt").exists()


def test_writing_makes_real_directories(tree):
    with Beneath(tree) as box:
        box.write_text("/work/a/b/c.txt", "deep")
    assert (tree / "work" / "a" / "b" / "c.txt").read_text() == "deep"
    assert not (tree / "work" / "a").is_symlink()


def test_deleting_a_link_removes_the_link_not_its_target(tree):
    (tree / "work" / "out").symlink_to(_host(tree))
    with Beneath(tree) as box:
        assert box.delete("/work/out") == 1
    assert _host(tree).read_text() == "HOST-CANARY"


def test_deleting_a_tree_never_descends_into_a_linked_directory(tree):
    victim = tree.parent / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("keep")
    (tree / "work" / "sub").mkdir()
    (tree / "work" / "sub" / "into-victim").symlink_to(victim)
    with Beneath(tree) as box:
        box.delete("/work")
    assert (victim / "keep.txt").read_text() == "keep"
    assert not (tree / "work").exists()


def test_deleting_through_a_symlinked_parent_is_refused(tree):
    (tree / "work" / "away").symlink_to(tree.parent)
    with Beneath(tree) as box, pytest.raises(UnsafePath):
        box.delete("/work/away/host-secret.txt")
    assert _host(tree).exists()


def test_a_walk_lists_links_as_links_and_never_enters_them(tree):
    (tree / "work" / "up").symlink_to(tree.parent)
    with Beneath(tree) as box:
        entries = {entry.path: entry.kind for entry in box.walk()}
    assert entries == {"work": "dir", "work/ok.txt": "file", "work/up": "link"}


def test_a_walk_stops_after_its_limit(tree):
    for number in range(30):
        (tree / "work" / f"f{number}").write_text("")
    with Beneath(tree) as box, pytest.raises(UnsafePath, match="more than 10 entries"):
        list(box.walk(limit=10))


def test_is_file_and_is_dir_do_not_follow_links(tree):
    (tree / "work" / "l").symlink_to("ok.txt")
    (tree / "work" / "d").symlink_to(tree.parent)
    with Beneath(tree) as box:
        assert box.is_file("/work/ok.txt") and box.is_dir("/work")
        assert not box.is_file("/work/l") and not box.is_dir("/work/d")
        assert not box.is_file("/work/d/host-secret.txt")
