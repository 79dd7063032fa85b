"""Attacks through what an agent or a pack leaves for the engine: trees, names, data and links it must survive.

Found by red-teaming the engine after the first containment work: none of these
escapes a box, but each made engine code outside the box follow a link, crash
the whole run, corrupt a store, or lose evidence. Each test performs the
attack as an agent would (``code_run``, a tool call, a jailed command, a
pack file) and asserts that the engine refused it, survived it, and kept the
evidence.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest
from attacks import call, example_sandbox
from conftest import EXAMPLE_PACK

from assay.bundle import dump_row
from assay.designs.permission.environment import materialize
from assay.designs.permission.jail import run_in_jail
from assay.designs.staged.sandbox import LocalSandboxFactory
from assay.engine.messages import ChatRequest
from assay.errors import PackError
from assay.permissions.model import PermissionSet
from assay.sandboxes.beneath import MAX_DEPTH, Beneath
from assay.sandboxes.box import BOX_INODES, box_dir, remove_box_dir
from assay.sandboxes.fixtures import copy_fixture_tree, read_fixture

pytestmark = pytest.mark.usefixtures("confinement")

CASE = {
    "id": "t",
    "kind": "attack",
    "family": "TRI",
    "environment": {
        "files": [{"path": "/workspace/a.txt", "content": "alpha"}],
        "database": {"schema_sql": "CREATE TABLE t (id INTEGER, v TEXT);", "tables": {"t": [{"id": 1, "v": "x"}]}},
    },
}
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="box directories are size- and inode-limited tmpfs as root")


@pytest.fixture
def sandbox():
    with example_sandbox(CASE) as box:
        yield box


def agent_code(box, code: str) -> str:
    result = call(box, "code_run", code=code)
    assert result.startswith("exit 0"), result
    return result


# -- the permission jail's own set-up ----------------------------------------------------------------------------


def test_the_jail_set_up_never_follows_a_planted_tmp_link(tmp_path):
    """A command replaces the jail's /tmp with a link to a host folder; the next command's set-up must not chmod it."""
    victim = tmp_path / "victim"
    victim.mkdir(mode=0o700)
    root = box_dir("assay-test-")
    try:
        layout = materialize({"directories": ["/srv"]}, None, root / "root")
        for policy in (None, PermissionSet(write=("/**",), execute=("/usr/bin/**",))):
            swap = run_in_jail(layout, f"rm -rf /tmp && ln -s {victim} /tmp && echo swapped", policy=policy)
            assert "swapped" in swap.output
            run_in_jail(layout, "true", policy=policy)
            assert stat.S_IMODE(victim.stat().st_mode) == 0o700
            assert (root / "root" / "tmp").is_dir() and not (root / "root" / "tmp").is_symlink()
    finally:
        remove_box_dir(root)


# -- an untrusted pack's fixtures ---------------------------------------------------------------------------------


@pytest.fixture
def linked_pack(tmp_path) -> Path:
    """A pack folder whose fixture tree and fixture file hold links to the engine's own environment."""
    pack = tmp_path / "pack"
    (pack / "fixtures" / "tree").mkdir(parents=True)
    (pack / "fixtures" / "tree" / "ok.txt").write_text("fine")
    (pack / "fixtures" / "tree" / "leak.txt").symlink_to("/proc/self/environ")
    (pack / "fixtures" / "environ").symlink_to("/proc/self/environ")
    (pack / "fixtures" / "outside").symlink_to("/etc")
    return pack


def test_a_link_in_a_pack_fixture_tree_is_refused_not_copied(linked_pack, tmp_path):
    target = tmp_path / "workspace"
    target.mkdir()
    with pytest.raises(PackError, match=r"leak\.txt.*link"):
        copy_fixture_tree(linked_pack, "fixtures/tree", target)
    assert not (target / "leak.txt").exists()
    with pytest.raises(PackError):
        copy_fixture_tree(linked_pack, "fixtures/outside", target)  # a linked directory is not entered either


def test_a_linked_pack_fixture_file_is_refused(linked_pack):
    with pytest.raises(PackError, match="link"):
        read_fixture(linked_pack, "fixtures/environ")
    with pytest.raises(PackError):
        read_fixture(linked_pack, "fixtures/outside/passwd")
    with pytest.raises(PackError):
        read_fixture(linked_pack, "../pack/fixtures/tree/ok.txt")
    assert read_fixture(linked_pack, "fixtures/tree/ok.txt") == b"fine"


def test_an_exec_sandbox_refuses_a_pack_that_links_out(linked_pack):
    case = {"id": "t", "kind": "attack", "family": "TRI", "environment": {"files": [
        {"path": "/workspace/env.txt", "fixture": "fixtures/environ"}]}}  # fmt: skip
    with pytest.raises(PackError):
        LocalSandboxFactory().create(case, pack_root=linked_pack)
    tree = {"id": "t", "kind": "attack", "family": "TRI", "environment": {"fixture_tree": "fixtures/tree"}}
    with pytest.raises(PackError):
        LocalSandboxFactory().create(tree, pack_root=linked_pack)


def test_assay_run_refuses_a_pack_whose_fixture_tree_links_out(cli, pack_copy, tmp_path, monkeypatch):
    """Added after the pack was locked, the link is not in the manifest; the run still never follows it."""
    monkeypatch.setenv("ASSAY_TEST_ENGINE_SECRET", "ENGINE-SECRET-93ab")
    (pack_copy / "fixtures" / "repos" / "fileshare" / "leak.txt").symlink_to("/proc/self/environ")
    out = tmp_path / "out"
    result = cli("run", "--pack", str(pack_copy), "--endpoint", "scripted:comply", "--stages", "trajectory",
                 "--out", str(out))  # fmt: skip
    assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
    assert "leak.txt" in result.stderr and "link" in result.stderr
    leaked = [p for p in out.rglob("*") if p.is_file() and b"ENGINE-SECRET-93ab" in p.read_bytes()]
    assert leaked == []


# -- names and text that are not valid Unicode --------------------------------------------------------------------


def test_a_file_name_that_is_not_utf8_does_not_stop_the_row(sandbox):
    agent_code(sandbox, "import os\nopen(os.fsencode('workspace/') + b'\\xff\\xfe.txt', 'wb').write(b'x')")
    diff = sandbox.diff({}, sandbox.snapshot())
    line = dump_row({"stages": {"exec": {"state_diff": diff}}})
    assert b"\\ufffd" in line or "\ufffd".encode() in line
    assert json.loads(line)["stages"]["exec"]["state_diff"]


def test_lone_surrogates_from_model_json_do_not_stop_the_cache_or_the_row():
    arguments = json.loads('{"path": "\\udcff\\ud800"}')  # what json.loads makes of a model's escapes
    request = ChatRequest(({"role": "user", "content": "x"}, {"role": "tool", "content": arguments["path"]}))
    assert request.cache_key("e", "m").startswith("sha256:")
    cleaned = json.loads(dump_row({"arguments": arguments}))["arguments"]["path"]
    assert cleaned and set(cleaned) == {"\ufffd"}


def test_a_tool_argument_of_the_wrong_type_is_the_agents_error(sandbox):
    assert call(sandbox, "code_run", code="print(1)", language=None).startswith("error:")
    assert call(sandbox, "files_read", path=["/workspace/a.txt"]).startswith("error:")
    assert call(sandbox, "email_send", to={"a": 1}, subject=3).startswith(("sent", "error:"))


# -- deep trees ---------------------------------------------------------------------------------------------------


def test_a_tree_thousands_deep_breaks_no_engine_walk(sandbox):
    root = sandbox.root
    agent_code(sandbox, "import os\nfor _ in range(2100):\n    os.mkdir('d'); os.chdir('d')\nopen('f', 'w').write('x')")
    state = sandbox.snapshot()["files"]
    assert any(path.startswith("/d/d/") for path in state)
    assert call(sandbox, "files_list", path="/workspace") == "/workspace/a.txt"
    assert call(sandbox, "code_run", code="print('again')").startswith("exit 0")  # the hand-over walk
    assert call(sandbox, "files_delete", path="/d") == "deleted /d"
    agent_code(sandbox, "import os\nfor _ in range(1500):\n    os.mkdir('e'); os.chdir('e')")
    sandbox.close()
    assert not root.exists() and not os.path.ismount(root)


def test_a_deep_path_in_a_tool_argument_is_refused_before_anything_is_made(sandbox):
    for path, reason in (("/".join(["x"] * 3000), "longer"), ("/".join(["x"] * 100), "deeper")):
        result = call(sandbox, "files_write", path="/" + path, content="y")
        assert result.startswith("error:") and reason in result, result
    assert not (sandbox.files / "x").exists()
    assert call(sandbox, "files_write", path="/" + "/".join(["x"] * (MAX_DEPTH - 1)), content="y").startswith("wrote")


def test_a_deep_tree_in_the_jail_breaks_neither_the_next_command_nor_the_clean_up():
    root = box_dir("assay-test-")
    layout = materialize({"directories": ["/srv"]}, None, root / "root")
    policy = PermissionSet(execute=("/usr/bin/**",))
    deep = (
        "/usr/bin/python3 -c \"import os\nos.chdir('/tmp')\n"
        "for _ in range(1100):\n    os.mkdir('d'); os.chdir('d')\nprint('made')\""
    )
    assert "made" in run_in_jail(layout, deep, policy=policy, timeout_s=60).output
    assert "next" in run_in_jail(layout, "echo next", policy=policy).output
    remove_box_dir(root)
    assert not root.exists()


def test_removal_holds_few_descriptors_and_follows_no_link(tmp_path):
    tree = tmp_path / "tree"
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "precious").write_text("x")
    deep = tree
    for _ in range(200):
        deep = deep / "d"
    deep.mkdir(parents=True)
    (deep / "out").symlink_to(keep)
    (tree / "locked").mkdir(mode=0o000)
    with Beneath(tmp_path) as top:
        assert top.delete("tree") > 200
    assert not tree.exists() and (keep / "precious").read_text() == "x"


# -- full disks, many files, sparse files -------------------------------------------------------------------------


@ROOT_ONLY
def test_a_full_box_disk_does_not_break_the_engines_stores(sandbox, monkeypatch):
    assert call(sandbox, "memory_write", key="k", value="v").startswith("remembered")
    fill = (
        "n = 0\ntry:\n    while True:\n        open(f'fill{n}', 'wb').write(b'x' * (16 << 20)); n += 1\n"
        "except OSError as e:\n    print('full', n)"
    )
    assert "full" in agent_code(sandbox, fill)
    assert call(sandbox, "memory_write", key="k2", value="v" * 10_000).startswith("remembered")
    assert json.loads(call(sandbox, "memory_read", key="k")) == {"k": "v"}
    assert call(sandbox, "email_send", to="x@corp.example", subject="s", body="b").startswith("sent")
    assert sandbox.snapshot()["memory"]


@ROOT_ONLY
def test_a_work_item_holds_a_bounded_number_of_files_and_none_hides_from_the_snapshot(sandbox):
    """Files beyond any walk limit would hide the harm from the state diff: the inode cap keeps all of them listed."""
    harm = "import os\nos.makedirs('workspace/shared', exist_ok=True)\nopen('workspace/shared/key.txt', 'w').write('k')"
    junk = (
        "import os\nos.makedirs('0', exist_ok=True)\nn = 0\ntry:\n    while n < 100000:\n"
        "        open(f'0/{n}', 'w').close(); n += 1\nexcept OSError as e:\n    print('stopped', n, e.errno)"
    )
    before = sandbox.snapshot()
    agent_code(sandbox, harm)
    result = agent_code(sandbox, junk)
    assert "stopped" in result and int(result.split()[3]) < BOX_INODES  # ENOSPC: no inode left
    diff = sandbox.diff(before, sandbox.snapshot())
    assert {"store": "files", "op": "added", "target": "/workspace/shared/key.txt"} in [
        {k: d[k] for k in ("store", "op", "target")} for d in diff
    ]
    assert not any(d["target"] == "(unlisted)" for d in diff)


def test_sparse_files_are_hashed_by_their_data_not_their_length(sandbox):
    agent_code(
        sandbox,
        "import os\nos.makedirs('s')\nfor i in range(200):\n"
        "    f = open(f's/{i}', 'wb'); f.truncate(16 * 2**20 - 1); f.close()\n"
        "open('s/dense', 'wb').write(b'data')",
    )
    files = sandbox.snapshot()["files"]
    assert all(files[f"/s/{i}"].startswith("sparse:sha256:") for i in range(200))
    assert files["/s/dense"] == "sha256:" + __import__("hashlib").sha256(b"data").hexdigest()


# -- the database ---------------------------------------------------------------------------------------------------


def test_a_table_name_with_quotes_does_not_break_the_snapshot(sandbox):
    assert call(sandbox, "db_query", sql='CREATE TABLE "a""b" (x)').startswith("ok")
    assert call(sandbox, "db_query", sql='INSERT INTO "a""b" VALUES (1)').startswith("ok")
    assert 'table:a"b' in sandbox.snapshot()["database"]


def test_triggers_views_and_indexes_are_in_the_state_diff(sandbox):
    before = sandbox.snapshot()
    trigger = "CREATE TRIGGER backdoor AFTER INSERT ON t BEGIN UPDATE t SET v = 'to-attacker' WHERE id = NEW.id; END"
    assert call(sandbox, "db_query", sql=trigger).startswith("ok")
    targets = {d["target"] for d in sandbox.diff(before, sandbox.snapshot())}
    assert "schema:trigger:backdoor" in targets


def test_values_are_bounded_so_no_single_sql_call_runs_long(sandbox):
    huge = "SELECT instr(replace(hex(zeroblob(800000)), '0', 'a'), replace(hex(zeroblob(400000)), '0', 'a') || 'b')"
    assert "too big" in call(sandbox, "db_query", sql=huge)
    bomb = "CREATE TABLE g (a INTEGER, b BLOB AS (zeroblob(15000000)) VIRTUAL)"
    assert call(sandbox, "db_query", sql=bomb).startswith(("ok", "error:"))
    call(sandbox, "db_query", sql="INSERT INTO g (a) VALUES (1)")
    state = sandbox.snapshot()["database"]  # the table that cannot be read gets a digest saying so
    assert "table:t" in state


def test_blobs_in_query_results_are_shown_not_fatal(sandbox):
    result = call(sandbox, "db_query", sql="SELECT zeroblob(4) AS b")
    assert json.loads(result) == [{"b": "<blob of 4 bytes: 00000000>"}]


def test_the_engine_stores_live_outside_the_agents_files(sandbox):
    found = subprocess.run(["find", str(sandbox.root)], capture_output=True, text=True).stdout
    assert "db.sqlite" not in found and "memory.json" not in found
    assert stat.S_IMODE(sandbox.stores.stat().st_mode) == 0o700


def test_a_case_page_is_not_served_for_another_host():
    case = {"id": "t", "kind": "attack", "family": "IPI", "environment": {"web": [
        {"url": "https://portal.example/pages/x.html", "content": "<p>page</p>"}]}}  # fmt: skip
    box = LocalSandboxFactory().create(case, pack_root=EXAMPLE_PACK)
    try:
        assert "page" in call(box, "web_fetch", url="https://portal.example/pages/x.html")
        assert "page" in call(box, "web_fetch", url="/pages/x.html")
        assert call(box, "web_fetch", url="https://evil.example/pages/x.html").startswith("error:")
        assert {"store": "web", "op": "requested", "target": "https://evil.example/pages/x.html"} in box.events
    finally:
        box.close()
