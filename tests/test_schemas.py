"""The committed schemas themselves: well-formed, stably identified, shipped in the wheel."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile

import jsonschema
import pytest
from conftest import REPO

from assay.schemas import DOCUMENT_NAMES, spec_dir, spec_schemas


@pytest.mark.parametrize("name", [*DOCUMENT_NAMES, "defs"])
def test_schema_is_valid_2020_12_with_stable_id(name):
    schema = spec_schemas(1).schema(name)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == f"https://assay.dev/spec/v1/{name}.schema.json"


@pytest.mark.parametrize("name", DOCUMENT_NAMES)
def test_every_document_carries_spec_version(name):
    schema = spec_schemas(1).schema(name)
    assert "spec_version" in schema["properties"]
    if name != "permission_policy":  # models write bare policies; see spec/CHANGELOG.md
        assert "spec_version" in schema["required"]


def test_fourteen_failure_labels_and_five_channels():
    defs = spec_schemas(1).schema("defs")["$defs"]
    assert len(defs["failure_label"]["enum"]) == 14
    assert defs["channel"]["anyOf"][0]["enum"] == ["user_turn", "document", "web_page", "tool_return", "memory_entry"]
    assert defs["channel"]["anyOf"][1] == {"$ref": "#/$defs/extension_name"}  # a plugin's channels (spec 1.1)
    assert defs["audit_outcome"]["enum"] == [
        "HarmEvidence",
        "SemanticOnly",
        "NotObservable",
        "NullAudit",
        "OtherNoHarm",
    ]


def test_schema_files_are_formatted_json():
    for path in (REPO / "spec" / "v1").glob("*.schema.json"):
        text = path.read_text()
        assert text == json.dumps(json.loads(text), indent=4) + "\n", f"{path.name} is not in canonical layout"


def test_checkout_is_the_spec_source_in_development():
    assert (spec_dir() / "v1" / "case.schema.json").is_file()


def test_wheel_ships_the_spec_registry_and_conformance(scratch_venv, tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(tmp_path), str(REPO)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    wheel = next(tmp_path.glob("assay-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in (*DOCUMENT_NAMES, "defs"):
        assert f"assay/_spec/v1/{name}.schema.json" in names
    assert "assay/_registry/packs.json" in names and "assay/_spec/CHANGELOG.md" in names
    assert any(n.startswith("assay/_spec/conformance/v1/") for n in names)
    # PEP 561: plugin authors' type checkers read the component protocols' types.
    assert "assay/py.typed" in names


def test_the_spec_vocabularies_the_engine_knows_are_the_schemas_enums():
    import json

    from assay.schemas import CASE_KINDS, CHANNELS, STAGES, spec_dir

    case = json.loads((spec_dir() / "v1" / "case.schema.json").read_text())
    defs = json.loads((spec_dir() / "v1" / "defs.schema.json").read_text())
    row = json.loads((spec_dir() / "v1" / "result_row.schema.json").read_text())
    assert tuple(case["properties"]["kind"]["anyOf"][0]["enum"]) == CASE_KINDS
    assert tuple(defs["$defs"]["channel"]["anyOf"][0]["enum"]) == CHANNELS
    assert tuple(defs["$defs"]["stage_name"]["anyOf"][0]["enum"]) == STAGES
    assert tuple(row["properties"]["stages"]["properties"]) == STAGES


@pytest.mark.parametrize(
    ("document", "edit", "pointer", "shown"),
    [
        ("case", lambda d: d.update(kind="atack"), "/kind", "'atack' is not one of ['attack', 'benign'"),
        ("case", lambda d: d["injections"][0].update(channel="tool-return"), "/injections/0/channel",
         "'tool-return' is not one of ['user_turn'"),
        ("result_row", lambda d: d["stages"].update(conversation={}), "/stages",
         "'conversation' is not one of ['semantic'"),
    ],
)  # fmt: skip
def test_a_misspelt_spec_name_is_told_the_spec_names_and_the_extension_form(document, edit, pointer, shown):
    """Spec 1.1 opens kinds, channels and stages to extension names: a typo must still hear the spec's own names."""
    import copy
    import json

    from assay.schemas import spec_dir

    entries = json.loads((spec_dir() / "conformance" / "v1" / f"{document}.json").read_text())
    valid = [e["document"] for e in entries if e["valid"] and (document != "case" or e["document"].get("injections"))]
    broken = copy.deepcopy(valid[0])
    edit(broken)
    (violation,) = spec_schemas(1).validate(document, broken)[:1]
    assert violation.pointer == pointer and violation.message.startswith(shown)
    assert violation.message.endswith("nor an extension name (x-<namespace>.<name>, from a plugin)")
