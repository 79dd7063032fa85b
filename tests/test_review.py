"""Blind review: packets hide the answers; imported labels give agreement, kappa and Spearman."""

from __future__ import annotations

import json

from conftest import REPO

from assay.engine.run import RunSettings, execute_run

SECAGENT = REPO / "plugins" / "assay-pack-secagent" / "src" / "assay_pack_secagent" / "pack"


def test_export_hides_the_answers_and_import_measures_agreement(strace, cli, tmp_path, host):
    outcome = execute_run(
        RunSettings(
            pack=str(SECAGENT),
            endpoints=["scripted:comply", "scripted:refuse"],
            out=tmp_path / "run",
            limit=6,
            progress=False,
        ),
        host=host,
    )
    review = tmp_path / "review"
    result = cli("review", "export", str(outcome.bundle), "--out", str(review), "--seed", "3")
    assert result.returncode == 0 and result.stdout.startswith("12 packets")
    packets = sorted((review / "packets").glob("*.json"))
    assert len(packets) == 12
    for path in packets:
        text = path.read_text()
        for hidden in (
            "scripted-comply",
            "scripted-refuse",
            "primary_failure_label",
            "grounding",
            "checker",
            "D0",
            "endpoint",
        ):
            assert hidden not in text, (hidden, path.name)
    key = json.loads((review / "key.json").read_text())
    rows = {
        json.dumps(json.loads(line)["key"], sort_keys=True): json.loads(line)
        for line in (outcome.bundle / "rows.jsonl").read_text().splitlines()
    }

    def truth(packet_id):
        trajectory = rows[json.dumps(key["packets"][packet_id], sort_keys=True)]["stages"]["trajectory"]
        label = trajectory["primary_failure_label"] or "success"
        return {
            "packet_id": packet_id,
            "success": trajectory["success"],
            "refusal": label == "strict_refusal",
            "label": label,
            "grounding": trajectory["grounding"]["score"],
        }

    perfect = [truth(p) for p in sorted(key["packets"])]
    sloppy = [dict(t, grounding=max(0, t["grounding"] - 1)) if i % 2 else dict(t) for i, t in enumerate(perfect)]
    sloppy[0] = dict(
        sloppy[0], success=not sloppy[0]["success"], label="validation_failure" if sloppy[0]["success"] else "success"
    )
    (tmp_path / "alice.json").write_text(json.dumps(perfect))
    (tmp_path / "bob.json").write_text(json.dumps(sloppy))
    result = cli(
        "review",
        "import",
        str(outcome.bundle),
        "--key",
        str(review / "key.json"),
        "--labels",
        str(tmp_path / "alice.json"),
        "--labels",
        str(tmp_path / "bob.json"),
        "--json",
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    alice, bob = report["vs_original"]["alice"], report["vs_original"]["bob"]
    assert alice["success"] == {"n": 12, "agreement": 1.0, "kappa": 1.0} and alice["grounding"]["exact"] == 1.0
    assert bob["success"]["agreement"] == 11 / 12 and bob["success"]["kappa"] < 1.0
    assert bob["grounding"]["within_one"] == 1.0 and bob["grounding"]["exact"] < 1.0
    assert "alice vs bob" in report["between_reviewers"]
    # Each source's label counts (the seed's table 11): bob moved one packet to another label.
    counts = report["label_counts"]
    assert counts["alice"] == counts["original"] and sum(counts["bob"].values()) == 12
    assert counts["bob"] != counts["original"]
    table = cli(
        "review",
        "import",
        str(outcome.bundle),
        "--key",
        str(review / "key.json"),
        "--labels",
        str(tmp_path / "alice.json"),
    )
    assert "| alice vs original | 1.00 | 1.00 |" in table.stdout
    assert "| label | original | alice |" in table.stdout


def test_packets_do_not_reveal_the_condition_in_any_turn(tmp_path):
    """The ``authorized`` sentence and the ``stress`` marker sit in the user turn (issue 14, item 5): export strips
    them there too, not only the system turn."""
    from assay.designs.trajectory.conditions import AUTHORIZED, STRESS
    from assay.designs.trajectory.review import export_packets
    from assay.policies import apply_defense, withhold

    def row(condition, policy):
        _, messages = apply_defense("system", [{"role": "user", "content": "Find the bug in src/auth.py."}], policy)
        transcript = withhold({"messages": [{"role": "system", "content": "system"}, *messages]}, policy)
        key = {"case_id": "t1", "endpoint": "e", "condition": condition, "seed": 0, "epoch": 0, "protocol": "default"}
        return {"key": key, "transcript": transcript, "stages": {"trajectory": {}}, "final_output": "done"}

    rows = [row("authorized", AUTHORIZED.document), row("stress", STRESS.document)]
    assert "authorized" in json.dumps(rows[0]) and "withheld" in json.dumps(rows[1])  # what a packet must not show
    texts = {"authorized": AUTHORIZED.document["text"], "stress": STRESS.document["text"]}
    assert export_packets(rows, tmp_path, condition_texts=texts) == 2
    for path in (tmp_path / "packets").glob("*.json"):
        packet = json.loads(path.read_text())
        shown = json.dumps(packet["transcript"])
        assert "authorized" not in shown and "withheld" not in shown and "sha256" not in shown, shown
        assert packet["transcript"] == [{"role": "user", "content": "Find the bug in src/auth.py."}]


def test_a_packet_id_does_not_give_the_condition_away(tmp_path):
    """Issue 30, item 7: a packet id was a hash of the row key and the (small, public) seed, so a reviewer could
    hash every key a packet might be (its task is in the packet; endpoints and conditions are in the manifest)
    and recover the condition of every packet. Ids are now keyed by a secret that stays in key.json."""
    import hashlib
    import itertools

    from assay.designs.trajectory.review import export_packets

    def row(condition):
        key = {"case_id": "t1", "endpoint": "e", "condition": condition, "seed": 0, "epoch": 0, "protocol": "default"}
        messages = [{"role": "user", "content": "Find the bug."}]
        return {"key": key, "transcript": {"messages": messages}, "stages": {"trajectory": {}}, "final_output": "x"}

    export_packets([row("standard"), row("authorized")], tmp_path, seed=0)
    ids = {path.stem for path in (tmp_path / "packets").glob("*.json")}
    guesses = set()
    for condition, salt in itertools.product(("standard", "authorized", "stress"), range(1000)):
        key = {"case_id": "t1", "endpoint": "e", "condition": condition, "seed": 0, "epoch": 0, "protocol": "default"}
        text = json.dumps({"key": key, "salt": salt}, sort_keys=True).encode()
        guesses.add("p-" + hashlib.sha256(text).hexdigest()[:16])
    assert not ids & guesses
    key = json.loads((tmp_path / "key.json").read_text())
    assert len(key["secret"]) == 64 and set(key["packets"]) == ids
    again = tmp_path / "again"
    export_packets([row("standard"), row("authorized")], again, seed=0)
    assert {path.stem for path in (again / "packets").glob("*.json")} != ids  # a fresh secret per export
