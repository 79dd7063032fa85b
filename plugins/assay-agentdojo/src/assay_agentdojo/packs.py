"""One case pack per AgentDojo suite, generated from the installed ``agentdojo`` and cached.

Every user task alone is a case of kind ``x-agentdojo.user_task`` (AgentDojo's
utility without attack); every user task x injection task pair is a case of
kind ``x-agentdojo.injection_task`` (utility under attack and the attack's
success). Each case carries AgentDojo's ids, the benchmark version, the
injection vectors the user task's ground truth shows the agent (AgentDojo's
injection candidates), both tasks' ground-truth calls and a digest of each
task's source and of the suite's data, so the pack digest changes whenever the
suite does.

Packs are written once per installed agentdojo (its RECORD's digest names the
cache folder), to ``$ASSAY_AGENTDOJO_CACHE`` or ``$XDG_CACHE_HOME/assay-agentdojo``
(``~/.cache/assay-agentdojo``), into a fresh folder that is renamed into place:
two processes generating at once both end with the same complete packs.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from assay.api import PluginError, lock_manifest

from .suites import (
    BENCHMARK_VERSION,
    NAMESPACE,
    SUITES,
    agentdojo_version,
    installed_fingerprint,
    source_digest,
    suite,
)

__all__ = [
    "GENERATOR_VERSION",
    "INJECTION_KIND",
    "TOOLS_FILE",
    "USER_KIND",
    "cache_root",
    "family_name",
    "generate",
    "generated_root",
    "pack_name",
    "suite_tools",
    "tool_schemas",
    "write_pack",
]

#: Bumped whenever what a generated case holds changes (a new cache folder, so old packs are never reused).
GENERATOR_VERSION = "1"
USER_KIND = f"{NAMESPACE}.user_task"
INJECTION_KIND = f"{NAMESPACE}.injection_task"
CHANNEL = f"{NAMESPACE}.injection_vector"
TOOLS_FILE = "tools.json"
_DONE = "complete"


def pack_name(suite_name: str) -> str:
    """The pack of a suite: ``agentdojo-workspace``, ..."""
    return f"agentdojo-{suite_name}"


def family_name(suite_name: str, kind: str) -> str:
    """The family of a suite's cases of one kind: ``agentdojo.workspace.user``, ``agentdojo.workspace.injection``."""
    return f"agentdojo.{suite_name}.{'user' if kind == USER_KIND else 'injection'}"


def cache_root() -> Path:
    """Where generated packs are kept."""
    explicit = os.environ.get("ASSAY_AGENTDOJO_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "assay-agentdojo"


def generated_root() -> Path:
    """The folder of the packs generated from the installed agentdojo (generating them on first use)."""
    root = cache_root() / _folder()
    if not (root / _DONE).is_file():
        generate(root)
    return root


@functools.cache
def _folder() -> str:
    """The cache folder's name: the installed agentdojo's version and fingerprint (read once per process)."""
    return f"{agentdojo_version()}-{installed_fingerprint()[:16]}-g{GENERATOR_VERSION}"


def generate(root: Path) -> None:
    """Write every suite's pack and the tools file under ``root``, atomically (a rename of a complete folder)."""
    try:
        root.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".generating-", dir=root.parent))
    except OSError as exc:
        raise PluginError(
            f"assay-agentdojo: cannot write its packs under {root.parent} ({exc.strerror}): "
            "set ASSAY_AGENTDOJO_CACHE to a writable folder"
        ) from None
    try:
        tools: dict[str, list[dict[str, Any]]] = {}
        for name in SUITES:
            write_pack(staging / name, name)
            tools[name] = tool_schemas(name)
        (staging / TOOLS_FILE).write_text(_dump(tools), encoding="utf-8")
        (staging / _DONE).write_text(agentdojo_version() + "\n", encoding="utf-8")
        try:
            staging.rename(root)
        except OSError:
            if not (root / _DONE).is_file():  # not another process's finished packs: something else is wrong
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def suite_tools(root: Path) -> dict[str, list[dict[str, Any]]]:
    """The generated tools file: each suite's tools as OpenAI function schemas."""
    data: dict[str, list[dict[str, Any]]] = json.loads((root / TOOLS_FILE).read_text(encoding="utf-8"))
    return data


@functools.cache
def _tool_schemas(suite_name: str) -> str:
    return json.dumps(
        [
            {
                "type": "function",
                "function": {
                    "name": function.name,
                    "description": function.description,
                    "parameters": function.parameters.model_json_schema(),
                },
            }
            for function in suite(suite_name).tools
        ]
    )


def tool_schemas(suite_name: str) -> list[dict[str, Any]]:
    """A suite's tools as OpenAI tool schemas, exactly as AgentDojo's OpenAI pipeline offers them (a fresh copy:
    building them is slow, so they are built once per process)."""
    schemas: list[dict[str, Any]] = json.loads(_tool_schemas(suite_name))
    return schemas


def _dump(document: Any) -> str:
    return json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def _calls(calls: Sequence[Any]) -> list[dict[str, Any]]:
    return [{"function": call.function, "args": call.model_dump(mode="json")["args"]} for call in calls]


def _data_digest(suite_name: str) -> str:
    from agentdojo.task_suite.task_suite import read_suite_file

    loaded = suite(suite_name)
    digest = hashlib.sha256()
    for file in ("environment.yaml", "injection_vectors.yaml"):
        digest.update(read_suite_file(loaded.name, file, loaded.data_path).encode("utf-8"))
    return "sha256:" + digest.hexdigest()


def _candidates(loaded: Any, user_task: Any) -> list[str]:
    """The injection vectors the user task's ground truth shows the agent: AgentDojo's own injection candidates."""
    from agentdojo.agent_pipeline.ground_truth_pipeline import GroundTruthPipeline
    from agentdojo.attacks.base_attacks import FixedJailbreakAttack

    attack = FixedJailbreakAttack("{goal}", loaded, GroundTruthPipeline(None))
    try:
        return list(attack.get_injection_candidates(user_task))
    except ValueError:  # AgentDojo's "is not injectable": the pair cannot be attacked
        return []


def _cases(suite_name: str) -> list[dict[str, Any]]:
    loaded = suite(suite_name)
    common = {"suite": suite_name, "benchmark_version": BENCHMARK_VERSION, "agentdojo": agentdojo_version()}
    common["data_sha256"] = _data_digest(suite_name)
    default_environment = loaded.load_and_inject_default_environment({})
    injection_tasks = sorted(loaded.injection_tasks.items(), key=lambda item: _number(item[0]))
    injection_truth = {
        task_id: _calls(task.ground_truth(default_environment.model_copy(deep=True)))
        for task_id, task in injection_tasks
    }
    cases = []
    for user_id, user_task in sorted(loaded.user_tasks.items(), key=lambda item: _number(item[0])):
        environment = user_task.init_environment(default_environment.model_copy(deep=True))
        user = {
            **common,
            "user_task": user_id,
            "difficulty": user_task.DIFFICULTY.name.lower(),
            "ground_truth": _calls(user_task.ground_truth(environment.model_copy(deep=True))),
            "ground_truth_output": user_task.GROUND_TRUTH_OUTPUT,
            "user_task_sha256": source_digest(user_task),
        }
        messages = [{"role": "user", "content": user_task.PROMPT}]
        cases.append(
            {
                "spec_version": "1.1",
                "id": user_id,
                "kind": USER_KIND,
                "family": family_name(suite_name, USER_KIND),
                "title": f"AgentDojo {suite_name} {user_id}",
                "instruction": user_task.PROMPT,
                "messages": messages,
                "oracles": [{"plugin": "agentdojo.utility", "decides": "utility"}],
                "tags": [f"difficulty:{user['difficulty']}"],
                "extensions": {NAMESPACE: {**user, "injection_task": None, "injection_vectors": []}},
            }
        )
        vectors = _candidates(loaded, user_task)
        for injection_id, injection_task in injection_tasks:
            cases.append(
                {
                    "spec_version": "1.1",
                    "id": f"{user_id}.{injection_id}",
                    "kind": INJECTION_KIND,
                    "family": family_name(suite_name, INJECTION_KIND),
                    "title": f"AgentDojo {suite_name} {user_id} under {injection_id}",
                    "instruction": user_task.PROMPT,
                    "messages": messages,
                    "injections": [
                        {"channel": CHANNEL, "content": injection_task.GOAL, "location": v} for v in vectors
                    ],
                    "oracles": [
                        {"plugin": "agentdojo.utility", "decides": "utility"},
                        {"plugin": "agentdojo.security", "decides": "attack"},
                    ],
                    "tags": [f"difficulty:{user['difficulty']}"],
                    "extensions": {
                        NAMESPACE: {
                            **user,
                            "injection_task": injection_id,
                            "injection_vectors": vectors,
                            "goal": injection_task.GOAL,
                            "injection_ground_truth": injection_truth[injection_id],
                            "injection_ground_truth_output": injection_task.GROUND_TRUTH_OUTPUT,
                            "injection_task_sha256": source_digest(injection_task),
                        }
                    },
                }
            )
    return cases


def _number(task_id: str) -> int:
    return int(task_id.rsplit("_", 1)[-1])


def write_pack(root: Path, suite_name: str) -> None:
    """Write one suite's pack under ``root`` (a new folder) from the installed agentdojo, and lock it."""
    (root / "cases").mkdir(parents=True)
    kinds = (USER_KIND, INJECTION_KIND)
    manifest = {
        "spec_version": "1.1",
        "name": pack_name(suite_name),
        "version": BENCHMARK_VERSION.removeprefix("v"),
        "description": (
            f"AgentDojo's {suite_name} suite (benchmark {BENCHMARK_VERSION}, agentdojo {agentdojo_version()}): "
            "every user task alone, and every user task under every injection task."
        ),
        "license": "MIT",
        "homepage": "https://agentdojo.spylab.ai",
        "families": [family_name(suite_name, kind) for kind in kinds],
        "stages": [f"{NAMESPACE}.task"],
        "cases": [],
        "fixtures": [],
        "digest": "",
    }
    (root / "pack.json").write_text(_dump(manifest), encoding="utf-8")
    for case in _cases(suite_name):
        (root / "cases" / f"{case['id']}.json").write_text(_dump(case), encoding="utf-8")
    lock_manifest(root)


def case_data(case: Mapping[str, Any]) -> Mapping[str, Any]:
    """The AgentDojo part of a case (its ``extensions``), or an empty mapping for another pack's case."""
    data = case.get("extensions", {}).get(NAMESPACE)
    return data if isinstance(data, Mapping) else {}
