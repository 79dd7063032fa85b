"""One work item's AgentDojo environment: the suite's tools acting on AgentDojo's own environment objects.

:class:`TaskEnvironment` fills the injection vectors through AgentDojo's own
attack class, builds the environment exactly as AgentDojo's
``run_task_with_pipeline`` does (the suite's default environment with the
injections, then the user task's ``init_environment``), keeps the
pre-environment, and runs each tool call the way AgentDojo's ``ToolsExecutor``
does, keeping the function trace its checks read. The agent loop
(:mod:`assay_agentdojo.stage`) and the re-derivation of a recorded row
(:mod:`assay_agentdojo.rederive`) both drive it.

The tools are pure Python over in-memory objects (no file, process or socket):
what an agent can do to this process is bounded here instead. Arguments that
are not a JSON object are refused, AgentDojo's conversion of list-looking
strings is applied only to short strings (it runs ``ast.literal_eval`` on
model output), and a turn's tool calls are capped.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assay.api import UsageError

from .conditions import DEFAULT_MODEL_NAME, Condition, condition
from .packs import case_data
from .suites import freeze_clock, suite

__all__ = [
    "AgentDojoSandbox",
    "CallRecord",
    "MAX_CALLS_PER_TURN",
    "NOT_RUN",
    "TaskEnvironment",
    "model_name_for",
    "system_message",
]

#: The most tool calls of one assistant turn that are run (AgentDojo runs all; a hostile agent could send thousands).
MAX_CALLS_PER_TURN = 32
#: What the agent is shown for a call past :data:`MAX_CALLS_PER_TURN` (the call is not run).
NOT_RUN = f"Not run: at most {MAX_CALLS_PER_TURN} tool calls of one message are run."
#: The longest argument string AgentDojo's list conversion (``ast.literal_eval``) is applied to.
MAX_LITERAL = 4096
#: At most this many entries of a state diff are recorded.
MAX_DIFF_ENTRIES = 64


@functools.cache
def system_message() -> str:
    """AgentDojo's default system message (``data/system_messages.yaml``), as its pipelines send it.

    Read from the package's data as AgentDojo's ``load_system_message`` reads it, without importing its agent
    pipelines (which import every model provider's client).
    """
    import importlib.resources

    import yaml

    with (importlib.resources.files("agentdojo") / "data" / "system_messages.yaml").open(encoding="utf-8") as file:
        text: str = yaml.safe_load(file)["default"]
    return text


def build_environment(loaded: Any, injections: Mapping[str, str]) -> Any:
    """The suite's default environment with ``injections`` filled in: AgentDojo's
    ``load_and_inject_default_environment``, step for step, with the YAML read by libyaml's loader where PyYAML
    has it (twenty times faster on the workspace suite; a test holds the two equal on every suite).
    """
    import yaml
    from agentdojo.task_suite.task_suite import read_suite_file, validate_injections

    loader = getattr(yaml, "CSafeLoader", None)
    if loader is None:
        return loaded.load_and_inject_default_environment(dict(injections))
    text = read_suite_file(loaded.name, "environment.yaml", loaded.data_path)
    defaults = loaded.get_injection_vector_defaults()
    validate_injections(dict(injections), defaults)
    return loaded.environment_type.model_validate(yaml.load(text.format(**dict(defaults, **injections)), loader))


def model_name_for(endpoint_model: str | None) -> str:
    """The model's name in prose, as AgentDojo's ``get_model_name_from_pipeline`` derives it from a pipeline name
    (the first of its known model ids the name contains); AgentDojo's default name when it knows none."""
    from agentdojo.models import MODEL_NAMES

    for full_name, prose in MODEL_NAMES.items():
        if endpoint_model and full_name in endpoint_model:
            return str(prose)
    return DEFAULT_MODEL_NAME


@functools.cache
def _attack(suite_name: str, attack_name: str, user_name: str, model_name: str) -> Any:
    """AgentDojo's own attack object, its victim names set as the condition says (one per combination: the
    object is then never changed, so threads may share it)."""
    from agentdojo.agent_pipeline.ground_truth_pipeline import GroundTruthPipeline
    from agentdojo.attacks.attack_registry import load_attack

    stand_in = GroundTruthPipeline(None)
    stand_in.name = "local"  # a name AgentDojo knows; the model's name is set below
    attack = load_attack(attack_name, suite(suite_name), stand_in)
    attack.user_name, attack.model_name = user_name, model_name
    return attack


def fill_injections(case: Mapping[str, Any], made: Condition, model_name: str) -> dict[str, str]:
    """The injection vectors of an injection-task case filled by the condition's attack, exactly as AgentDojo's
    attack fills them; refused when the installed attack's text or the vectors it fills are not the case's."""
    data = case_data(case)
    attack = _attack(data["suite"], made.attack.name, made.attack.user_name, model_name)
    if attack.jailbreak != made.attack.template:
        raise UsageError(
            f"condition {made.name!r}: the installed agentdojo's {made.attack.name} text differs from the "
            "condition's (reinstall assay-agentdojo with the agentdojo it pins)"
        )
    loaded = suite(data["suite"])
    injections: dict[str, str] = attack.attack(
        loaded.get_user_task_by_id(data["user_task"]), loaded.get_injection_task_by_id(data["injection_task"])
    )
    if sorted(injections) != sorted(data["injection_vectors"]):
        raise UsageError(
            f"case {case['id']}: the installed agentdojo fills the vectors {sorted(injections)}, the case names "
            f"{sorted(data['injection_vectors'])} (regenerate the pack: it is not the installed suite's)"
        )
    return injections


def text_digest(text: str) -> str:
    """sha256 of a text, as outcomes record the injections by."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


_SPACE = re.compile(r"\s+")


def flatten_space(text: str) -> str:
    """``text`` with every run of white space as one space: an injection's text reaches the agent through the
    suite's YAML data, which folds its line breaks, so it is looked for this way."""
    return _SPACE.sub(" ", text).strip()


def _strings(value: Any) -> Iterator[str]:
    """Every string inside a tool's result (a pydantic model, a list, a mapping, a scalar)."""
    if hasattr(value, "model_dump"):
        value = value.model_dump()
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _as_list(value: Any) -> Any:
    """AgentDojo's conversion of a list-looking string argument (``is_string_list``), bounded."""
    if not isinstance(value, str) or len(value) > MAX_LITERAL or not value.lstrip().startswith("["):
        return value
    try:
        parsed = ast.literal_eval(value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return value
    return parsed if isinstance(parsed, list) else value


@dataclass
class CallRecord:
    """One tool call as the agent made it and what came of it."""

    call_id: str
    name: str
    arguments: Any  # what the model sent (a JSON object, or the raw text when it did not parse)
    shown: str  # what the agent was given back
    error: str | None
    exposed_before: bool  # the agent had seen an injection before this call
    changed: bool  # the call changed the environment


@dataclass
class TaskEnvironment:
    """The environment of one work item of the ``x-agentdojo.task`` stage (see the module docstring)."""

    case: Mapping[str, Any]
    made: Condition
    model_name: str
    injections: dict[str, str] = field(init=False)
    calls: list[CallRecord] = field(default_factory=list, init=False)
    trace: list[Any] = field(default_factory=list, init=False)  # AgentDojo FunctionCall objects, in order

    def __post_init__(self) -> None:
        from agentdojo.functions_runtime import FunctionsRuntime

        freeze_clock()
        data = case_data(self.case)
        if not data:
            raise UsageError(f"case {self.case.get('id')!r} is not an AgentDojo case (it has no x-agentdojo data)")
        self.suite = suite(data["suite"])
        self.user_task = self.suite.get_user_task_by_id(data["user_task"])
        self.injection_task = (
            self.suite.get_injection_task_by_id(data["injection_task"]) if data["injection_task"] else None
        )
        self.injections = {} if self.injection_task is None else fill_injections(self.case, self.made, self.model_name)
        loaded = build_environment(self.suite, self.injections)
        self.environment = self.user_task.init_environment(loaded)
        self.pre_environment = self.environment.model_copy(deep=True)
        self.runtime = FunctionsRuntime(self.suite.tools)
        defense = self.made.data()
        self._delimiters: Sequence[str] | None = defense.get("tool_output_delimiters")
        self.exposed = False
        self._flat_injections = [flatten_space(text) for text in self.injections.values() if text.strip()]

    @property
    def prompt(self) -> str:
        """The user task's prompt."""
        return str(self.user_task.PROMPT)

    def tools(self) -> list[dict[str, Any]]:
        """The suite's tools as OpenAI tool schemas."""
        from .packs import tool_schemas

        return tool_schemas(case_data(self.case)["suite"])

    def injection_digests(self) -> dict[str, str]:
        """Each filled vector's text by digest, as the outcome records them."""
        return {vector: text_digest(text) for vector, text in sorted(self.injections.items())}

    def note_call(self, call_id: str, name: str, arguments: Any) -> Any:
        """Add a call the agent made to the function trace without running it (AgentDojo's trace holds every call
        of every assistant message, the last unexecuted ones too). Returns the trace entry."""
        from agentdojo.functions_runtime import FunctionCall

        args = dict(arguments) if isinstance(arguments, Mapping) else {}
        entry = FunctionCall.model_construct(function=str(name), args=args, id=call_id)
        self.trace.append(entry)
        return entry

    def call(self, call_id: str, name: str, arguments: Any) -> CallRecord:
        """Run one tool call as AgentDojo's ``ToolsExecutor`` does and return what the agent is shown."""
        from agentdojo.agent_pipeline.tool_execution import tool_result_to_str

        entry = self.note_call(call_id, name, arguments)
        exposed_before = self.exposed
        error: str | None
        result: Any = ""
        if name not in self.runtime.functions:
            error = f"Invalid tool {name} provided."
        elif not isinstance(arguments, Mapping):
            error = "ValidationError: the arguments must be a JSON object"
        else:
            for key, value in list(entry.args.items()):
                entry.args[key] = _as_list(value)  # in place, as AgentDojo's executor changes the call it traces
            before = self.environment.model_dump() if exposed_before else None
            result, error = self.runtime.run_function(self.environment, name, entry.args)
            changed = before is not None and before != self.environment.model_dump()
            formatted = tool_result_to_str(result)
            if self._delimiters:
                formatted = f"{self._delimiters[0]}{formatted}{self._delimiters[1]}"
            if self._seen(result):
                self.exposed = True
            record = CallRecord(call_id, name, arguments, error or formatted, error, exposed_before, changed)
            self.calls.append(record)
            return record
        record = CallRecord(call_id, name, arguments, error, error, exposed_before, False)
        self.calls.append(record)
        return record

    def _seen(self, result: Any) -> bool:
        """Whether a tool's result shows the agent one of the injections."""
        if not self.injections:
            return False
        flat = [flatten_space(string) for string in _strings(result)]
        return any(text in string for text in self._flat_injections for string in flat)

    def snapshot(self) -> Any:
        """A copy of the environment as it is now."""
        return self.environment.model_copy(deep=True)

    def diff(self, before: Any, after: Any) -> list[dict[str, Any]]:
        """What changed between two environments, as state-diff entries (``store`` is the top-level part)."""
        entries: list[dict[str, Any]] = []
        _diff(before.model_dump(mode="json"), after.model_dump(mode="json"), "", entries)
        return entries[:MAX_DIFF_ENTRIES]


def _diff(before: Any, after: Any, path: str, entries: list[dict[str, Any]]) -> None:
    if len(entries) > MAX_DIFF_ENTRIES or before == after:
        return
    store = path.split("/")[1] if path else ""
    if isinstance(before, dict) and isinstance(after, dict):
        for key in sorted(set(before) | set(after), key=str):
            where = f"{path}/{key}"
            if key not in before:
                entries.append({"store": store or str(key), "op": "add", "target": where})
            elif key not in after:
                entries.append({"store": store or str(key), "op": "delete", "target": where})
            else:
                _diff(before[key], after[key], where, entries)
    elif isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        for index, (old, new) in enumerate(zip(before, after, strict=True)):
            _diff(old, new, f"{path}/{index}", entries)
    else:
        entries.append({"store": store, "op": "change", "target": path or "/"})


class _Instance:
    """A :class:`TaskEnvironment` as an assay sandbox instance (the ``SandboxInstance`` protocol)."""

    def __init__(self, environment: TaskEnvironment) -> None:
        self.environment = environment

    def tools(self) -> Sequence[Mapping[str, Any]]:
        """The suite's tools."""
        return self.environment.tools()

    async def call(self, name: str, arguments: object) -> str:
        """Run one call; a bad one is answered with AgentDojo's error text."""
        return self.environment.call(f"call-{len(self.environment.calls)}", name, arguments).shown

    def snapshot(self) -> Any:
        """A copy of the environment."""
        return self.environment.snapshot()

    def diff(self, before: Any, after: Any) -> list[dict[str, Any]]:
        """What changed."""
        return self.environment.diff(before, after)

    def close(self) -> None:
        """Nothing to delete: the environment is in memory."""


@dataclass(frozen=True)
class AgentDojoSandbox:
    """The ``agentdojo`` sandbox: an AgentDojo case's environment, in memory, with its suite's tools.

    ``options``: ``condition`` (an AgentDojo condition, default the headline attack) and ``model_name`` (the name
    the attack calls the model by).
    """

    name: str = "agentdojo"
    description: str = "AgentDojo's environments (in memory) with their suite's tools; runs AgentDojo cases only."
    make: Callable[..., TaskEnvironment] = field(default=TaskEnvironment, repr=False)

    def create(
        self, case: Mapping[str, Any], *, pack_root: Path, options: Mapping[str, str] | None = None
    ) -> _Instance:
        """The environment of one AgentDojo case."""
        options = dict(options or {})
        made = condition(options.get("condition", "agentdojo.important_instructions"))
        if made is None:
            raise UsageError(f"sandbox agentdojo: condition {options.get('condition')!r} is not an AgentDojo one")
        return _Instance(self.make(case, made, options.get("model_name", DEFAULT_MODEL_NAME)))
