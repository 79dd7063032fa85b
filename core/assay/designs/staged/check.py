"""The exec stage's replay check of a pack (a suite check, as peer benchmarks run one; ``assay pack check`` runs it).

A scripted attacker-compliant agent replays every case's ``replay.attack``
and a scripted safe agent its ``replay.safe``, both through the real exec
stage and sandbox. Every harm oracle (deciding observed_harm or persist_harm)
of an attack case must fire for the first and none for the second; every
benign case's utility oracles must fire for the safe agent. A case that fails
is named with the oracle that disagreed.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ...components import PackCheck, PackCheckResult
from ...engine.planner import WorkItem
from ...engine.runtime import Job, Runtime
from ...engine.threads import use_worker_threads

__all__ = ["check_exec_replay"]

_HARM = ("observed_harm", "persist_harm")


def _fired(row: dict[str, Any], decides: tuple[str, ...]) -> list[tuple[str, bool]]:
    return [(r["oracle"], r["fired"]) for r in row["stages"]["exec"]["oracle_results"] if r["decides"] in decides]


#: Tool results that begin so are the sandbox's refusals (an unknown tool, bad arguments, a failed call).
_TOOL_ERROR = "error: "


def _failed_calls(row: dict[str, Any]) -> str:
    """The replayed calls the sandbox refused, as a clause for a failure message ("" when none did).

    An oracle that never fires is most often a replay step that never ran: a misspelt tool name, a missing
    argument. The sandbox's own one-line answer says which; no Python internals reach the author.
    """
    messages = row["stages"]["exec"].get("transcript", {}).get("messages", [])
    failed = [
        f"{message.get('name')}: {str(message.get('content'))[len(_TOOL_ERROR) :]}"
        for message in messages
        if message.get("role") == "tool" and str(message.get("content", "")).startswith(_TOOL_ERROR)
    ]
    return f" (replayed calls that failed: {'; '.join(failed)})" if failed else ""


def check_exec_replay(check: PackCheck) -> PackCheckResult:
    """Replay every exec case of the pack with the compliant and the safe scripted agents."""
    pack, host, sandbox, concurrency = check.pack, check.host, check.sandbox, check.concurrency
    job = Job(
        pack_root=str(pack.root.resolve()),
        endpoints=(("attacker", "scripted", (("mode", "comply"),)), ("safe", "scripted", (("mode", "refuse"),))),
        judge=("rule", ()),
        stages=("exec",),
        cache_path=None,
        sandbox=(sandbox, ()),
    )

    def has_exec(entry: dict[str, Any]) -> bool:
        family = host.registry.get("families", entry["family"])
        return family is not None and "exec" in family.stages

    index = {case_id: entry for case_id, entry in pack.case_index().items() if has_exec(entry)}
    counts = {"attack cases": 0, "benign cases": 0}
    failures: list[str] = []

    async def go() -> list[tuple[WorkItem, dict[str, Any]]]:
        use_worker_threads(concurrency)
        runtime = Runtime(job, host)
        limit = asyncio.Semaphore(concurrency)

        async def one(item: WorkItem) -> tuple[WorkItem, dict[str, Any]]:
            async with limit:
                row = await runtime.execute(item)
            if check.progress is not None:
                check.progress.advance()
            return item, row

        items = [
            WorkItem(case_id, endpoint, "D0", 0, 0, "replay-check")
            for case_id in sorted(index)
            for endpoint in ("attacker", "safe")
        ]
        if check.progress is not None:
            check.progress.grow(len(items))
        try:
            return await asyncio.gather(*(one(item) for item in items))
        finally:
            await runtime.aclose()

    for item, row in asyncio.run(go()):
        family = host.registry.get("families", index[item.case_id]["family"])
        kind = family.kind if family is not None else "attack"
        if "exec" not in row["stages"]:
            if item.endpoint == "attacker":
                failures.append(
                    f"{item.case_id}: the exec stage did not run "
                    f"({'; '.join(e['message'] for e in row['errors']) or 'no outcome'})"
                )
            continue
        if kind == "benign":
            if item.endpoint == "safe":
                counts["benign cases"] += 1
                missed = [name for name, fired in _fired(row, ("benign_utility",)) if not fired]
                if missed or not _fired(row, ("benign_utility",)):
                    failures.append(
                        f"{item.case_id}: the safe agent does not complete the benign task "
                        f"(utility oracle {', '.join(missed) or 'missing'}){_failed_calls(row)}"
                    )
            continue
        harm = _fired(row, _HARM)
        if item.endpoint == "attacker":
            counts["attack cases"] += 1
            if not harm:
                failures.append(f"{item.case_id}: no harm oracle (observed_harm or persist_harm)")
            for name, fired in harm:
                if not fired:
                    failures.append(
                        f"{item.case_id}: harm oracle {name} does not fire for the attacker-compliant replay"
                        f"{_failed_calls(row)}"
                    )
        else:
            for name, fired in harm:
                if fired:
                    failures.append(f"{item.case_id}: harm oracle {name} fires for the safe replay")
    return PackCheckResult(frozenset(index), counts, failures)
