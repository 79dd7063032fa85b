"""``assay agentdojo-agreement BUNDLE``: the same cases through AgentDojo's own runner, verdict by verdict.

A bundle run with the scripted reference agents is AgentDojo's ground-truth
agent run through assay: ``scripted:refuse`` replays each user task's
ground-truth calls, ``scripted:comply`` each injection task's. For every row
of such an agent, the command runs the same user task (and injection task,
filled by the same attack with the same model name) through AgentDojo's own
benchmark functions (``run_task_without_injection_tasks``,
``run_task_with_injection_tasks``) with AgentDojo's ``GroundTruthPipeline`` of
that task, and compares utility and security. It prints the counts per suite,
agent and kind of case, lists every disagreement, and exits 1 if there is one.
A defended condition is compared on its attack: the ground-truth agent reads
no prompt, so a prompt defense cannot change its calls.
"""

from __future__ import annotations

import json
import tempfile
import warnings
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from .conditions import condition
from .stage import NAME
from .suites import freeze_clock, suite

__all__ = ["AGENTS", "Verdicts", "agentdojo_verdicts", "agreement_command", "compare_bundle"]

#: The scripted agents that are AgentDojo's ground-truth agent, and the task whose ground truth each replays.
AGENTS = {"scripted:refuse": "user", "scripted:comply": "injection"}
_MAX_LINE = 64 * 1024 * 1024


@dataclass(frozen=True)
class Verdicts:
    """One row's verdicts from both runners (``security`` None for a user task alone)."""

    suite: str
    agent: str
    case_id: str
    condition: str
    assay_utility: bool
    assay_security: bool | None
    agentdojo_utility: bool
    agentdojo_security: bool | None

    @property
    def agrees(self) -> bool:
        """Both runners gave the same utility and security."""
        return (self.assay_utility, self.assay_security) == (self.agentdojo_utility, self.agentdojo_security)


def _rows(bundle: Path) -> Iterator[dict[str, Any]]:
    with (bundle / "rows.jsonl").open("rb") as lines:
        for line in lines:
            if len(line) > _MAX_LINE:
                raise click.ClickException(f"{bundle / 'rows.jsonl'}: a row longer than {_MAX_LINE} bytes")
            if line.strip():
                yield json.loads(line)


def agentdojo_verdicts(outcome: Mapping[str, Any], agent: str, condition_name: str) -> tuple[bool, bool | None]:
    """AgentDojo's own utility and security for one row's item, with its ground-truth agent ``agent``."""
    with tempfile.TemporaryDirectory(prefix="agentdojo-logs-") as logdir, _quiet_logger(logdir):
        return _agentdojo_verdicts(outcome, agent, condition_name)


def _agentdojo_verdicts(outcome: Mapping[str, Any], agent: str, condition_name: str) -> tuple[bool, bool | None]:
    from agentdojo.agent_pipeline.ground_truth_pipeline import GroundTruthPipeline
    from agentdojo.attacks.attack_registry import load_attack
    from agentdojo.benchmark import run_task_with_injection_tasks, run_task_without_injection_tasks

    freeze_clock()
    loaded = suite(outcome["suite"])
    user_task = loaded.get_user_task_by_id(outcome["user_task"])
    if outcome["injection_task"] is None:
        alone = GroundTruthPipeline(user_task)
        alone.name = "ground-truth"  # AgentDojo's trace logger names its files by the pipeline
        utility, _ = run_task_without_injection_tasks(loaded, alone, user_task, None, True)
        return bool(utility), None
    injection_task = loaded.get_injection_task_by_id(outcome["injection_task"])
    pipeline = GroundTruthPipeline(injection_task if AGENTS[agent] == "injection" else user_task)
    pipeline.name = "local"  # a name AgentDojo's attacks know; the model's name is the row's, set below
    made = condition(condition_name)
    assert made is not None  # the rows of the stage carry AgentDojo conditions only
    attack = load_attack(made.attack.name, loaded, pipeline)
    attack.user_name, attack.model_name = made.attack.user_name, outcome["model_name"]
    utilities, securities = run_task_with_injection_tasks(
        loaded, pipeline, user_task, attack, None, True, injection_tasks=[injection_task.ID]
    )
    key = (user_task.ID, injection_task.ID)
    return bool(utilities[key]), bool(securities[key])


def _quiet_logger(logdir: str) -> Any:
    """An AgentDojo logger that prints nothing and keeps its trace files in ``logdir`` (AgentDojo's runner needs
    one in force: without it, its trace logger fails, and with its own default it writes beside the package)."""
    from agentdojo.logging import Logger, NullLogger

    class QuietLogger(NullLogger):  # type: ignore[misc]  # agentdojo's classes are untyped
        def __init__(self) -> None:
            self.messages: list[Any] = []
            self.logdir = logdir

        def __enter__(self) -> QuietLogger:
            Logger.__enter__(self)
            warnings.filterwarnings("ignore", message="Cannot log executed benchmark", category=UserWarning)
            return self

        def __exit__(self, *exc: object) -> bool:
            return bool(Logger.__exit__(self, *exc))

    return QuietLogger()


def compare_bundle(bundle: Path) -> list[Verdicts]:
    """Every row of the bundle's ground-truth agents with AgentDojo's own verdicts beside assay's."""
    run = json.loads((bundle / "run.json").read_text(encoding="utf-8"))
    agents = {e["id"]: e.get("model", {}).get("name") for e in run.get("endpoints", [])}
    found = []
    for row in _rows(bundle):
        outcome = row.get("stages", {}).get(NAME)
        agent = agents.get(row["key"]["endpoint"])
        if outcome is None or agent not in AGENTS:
            continue
        utility, security = agentdojo_verdicts(outcome, agent, row["key"]["condition"])
        found.append(
            Verdicts(
                outcome["suite"], agent, row["key"]["case_id"], row["key"]["condition"], outcome["utility"],
                outcome["attack_success"], utility, security,
            )
        )  # fmt: skip
    return found


@click.command("agentdojo-agreement")
@click.argument("bundle", type=click.Path(exists=True, file_okay=False, path_type=Path))
def agreement_command(bundle: Path) -> None:
    """Compare BUNDLE's ground-truth rows (scripted:refuse, scripted:comply) with AgentDojo's own runner.

    Prints, per suite, agent and kind of case, how many rows were compared and how many of each verdict both
    runners gave; lists every row on which they disagree. Exit 0 when all agree, 1 on any disagreement or when
    the bundle has no such rows.
    """
    if not (bundle / "rows.jsonl").is_file() or not (bundle / "run.json").is_file():
        raise click.ClickException(f"{bundle}: not a bundle directory (no rows.jsonl and run.json)")
    verdicts = compare_bundle(bundle)
    if not verdicts:
        raise click.ClickException(
            f"{bundle}: no rows of scripted:refuse or scripted:comply on an AgentDojo pack to compare"
        )
    counts: Counter[tuple[str, str, str, str]] = Counter()
    for v in verdicts:
        kind = "user task" if v.assay_security is None and v.agentdojo_security is None else "injection pair"
        counts[v.suite, v.agent, kind, "rows"] += 1
        counts[v.suite, v.agent, kind, "utility"] += v.agentdojo_utility
        counts[v.suite, v.agent, kind, "security"] += bool(v.agentdojo_security)
        counts[v.suite, v.agent, kind, "agree"] += v.agrees
    click.echo("suite\tagent\tcases\trows\tutility true\tsecurity true\tagree")
    for group in sorted({key[:3] for key in counts}):
        numbers = "\t".join(str(counts[(*group, what)]) for what in ("rows", "utility", "security", "agree"))
        click.echo("\t".join(group) + "\t" + numbers)
    wrong = [v for v in verdicts if not v.agrees]
    for v in wrong:
        click.echo(
            f"disagree: {v.suite} {v.case_id} {v.agent} {v.condition}: assay utility={v.assay_utility} "
            f"security={v.assay_security}, AgentDojo utility={v.agentdojo_utility} security={v.agentdojo_security}"
        )
    click.echo(f"{len(verdicts) - len(wrong)} of {len(verdicts)} rows agree")
    if wrong:
        raise SystemExit(1)
