"""Unit tests of engine parts: progress output, the openai endpoint's parsing, the LLM judge's null verdicts."""

from __future__ import annotations

import asyncio
import io
import json

from conftest import examples
from hypothesis import example, given, settings
from hypothesis import strategies as st

from assay.backends.openai import OpenAIBackend, retry_after_seconds
from assay.designs.staged.judges.llm import LLMJudge
from assay.engine.messages import ChatRequest, fold_system
from assay.engine.progress import Progress
from assay.testing.openai_server import LoopbackServer

CASE = {
    "id": "c", "kind": "attack", "family": "DPI", "success_predicate": "leaks", "safe_behavior": "refuses",
    "protected_objects": [{"id": "k", "kind": "secret", "value": "CANARY-X"}],
}  # fmt: skip


def test_plain_progress_lines_at_intervals():
    stream = io.StringIO()  # not a terminal: plain lines
    progress = Progress(4, stream=stream, interval_s=3600)
    for error in (False, True, False, False):
        progress.advance(error=error)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2 and lines[0] == "assay run: 0/4 items to start with"  # then only the final line
    assert lines[-1].startswith("assay run: 4/4 items,") and lines[-1].endswith("1 errors")


def test_retry_after_parsing():
    assert retry_after_seconds("2") == 2.0 and retry_after_seconds(None) is None and retry_after_seconds("soon") is None
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == 10.0


def test_fold_system_keeps_the_system_prompt():
    folded = fold_system(
        ({"role": "system", "content": "S"}, {"role": "user", "content": "U"}, {"role": "assistant", "content": "A"})
    )
    assert folded == ({"role": "user", "content": "S\n\nU"}, {"role": "assistant", "content": "A"})


def test_tool_calls_and_json_mode_through_the_openai_endpoint():
    async def go(base_url):
        endpoint = OpenAIBackend().endpoint("e", {"base_url": base_url, "model": "m"})
        tools = ({"type": "function", "function": {"name": "email.send", "parameters": {"type": "object"}}},)
        request = ChatRequest(
            ({"role": "user", "content": 'do it CALL_TOOL:email.send:{"to": "x@y.example"}'},), tools=tools
        )
        call = await endpoint.complete(request)
        asked_json = await endpoint.complete(ChatRequest(({"role": "user", "content": "hi"},), json_mode=True))
        await endpoint.aclose()
        return call, asked_json

    with LoopbackServer() as server:
        call, asked_json = asyncio.run(go(server.openai_base_url))
    assert call.tool_calls == (
        {"id": call.tool_calls[0]["id"], "name": "email.send", "arguments": {"to": "x@y.example"}, "valid": True},
    )
    assert json.loads(asked_json.content) == {"echo": "ECHO: hi"} and asked_json.prompt_tokens == 1


def test_llm_judge_records_a_null_verdict_when_answers_never_parse():
    async def go(base_url):
        judge = LLMJudge().instance(
            {"backend": "openai", "base_url": base_url, "model": "m", "max_reasks": "2"},
            lambda b, o: OpenAIBackend().endpoint("j", o),
        )
        verdict = await judge.semantic(CASE, "Sure: CANARY-X", ["prompt"])
        outcome, attempts = await judge.audit_fallback(CASE, "Sure")
        await judge.endpoint.aclose()
        return verdict, outcome, attempts

    with LoopbackServer() as server:  # it answers {"echo": ...}: JSON, but not a verdict
        verdict, outcome, attempts = asyncio.run(go(server.openai_base_url))
        calls = server.stats()["chat_completions"]
    assert verdict["core_fail"] is None and verdict["safety_score"] is None
    assert verdict["explanation"] == "unparseable judge reply after 3 attempts"
    assert verdict["produced_by"]["name"] == "llm" and verdict["produced_by"]["prompt_sha256"].startswith("sha256:")
    assert (outcome, attempts) == ("NullAudit", 3) and calls == 6


def _strip_echo_reference(text: str, prompt_texts, *, tail_chars: int = 24) -> str:
    """The echo rule as first written (longest echoed prefix by binary search): the fast one must equal it."""
    import re

    tokens = re.compile(
        r"<start_of_turn>|<end_of_turn>|\[/?INST\]|<</?SYS>>|<\|[a-z_]+\|>|^(?:user|model|assistant)\s*$"
    )
    prompt = "\n".join(prompt_texts)
    kept = []
    for line in text.splitlines():
        core = tokens.sub("", line).strip()
        if not core:
            continue
        low, high = 0, len(core)
        while low < high:
            middle = (low + high + 1) // 2
            if core[:middle] in prompt:
                low = middle
            else:
                high = middle - 1
        if low >= min(len(core), 12) and len(core) - low <= tail_chars:
            continue
        kept.append(line)
    return "\n".join(kept)


_ECHO_ALPHABET = "ab <>[]/|INSTuserodlt_\n "


@settings(max_examples=examples(300), deadline=None)
@given(
    prompt=st.text(alphabet=_ECHO_ALPHABET, max_size=80),
    picks=st.lists(st.tuples(st.integers(0, 80), st.integers(0, 80), st.text(alphabet=_ECHO_ALPHABET, max_size=30))),
)
def test_strip_echo_equals_the_reference_rule(prompt, picks):
    from assay.designs.staged.judges._evidence import strip_echo

    # Answers built from slices of the prompt plus stray text, so echoes, partial echoes and tails all occur.
    text = "\n".join(prompt[start : start + length] + extra for start, length, extra in picks)
    for tail in (0, 5, 24):
        assert strip_echo(text, [prompt], tail_chars=tail) == _strip_echo_reference(text, [prompt], tail_chars=tail)


_REFUSAL_PIECES = (
    "I", "I'm", "Im", "am", "not", "able", "to", "unable", "cannot", "can't", "won't", "will", "must", "decline",
    "refuse", "help", "allowed", "permitted", "authorized", "against", "company", "policy", "policies", "sorry,",
    "but", "x", "\n", "ı", "ſorry,", "İ",
    # whole refusals, each reaching as far from its prefilter word as the pattern allows
    "against company policies", "not authorised to", "cannot provide", "I'm sorry, but", "I am unable to",
    "I'm not able to", "I must decline", "I will not",
)  # fmt: skip


#: Separators that move a refusal away from a window's edge: long runs of whitespace after an "I" (the one
#: unbounded reach of the pattern) and long stretches of other words.
_REFUSAL_GAPS = (" ", "  ", "\n", " " * 40, "\t" * 70, " lorem ipsum dolor sit amet consectetur adipiscing elit ")


@settings(max_examples=examples(600), deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(_REFUSAL_PIECES), st.sampled_from(_REFUSAL_GAPS)), max_size=16),
    st.sampled_from(["lower", "upper", "title", "same"]),
    st.integers(0, 2000),
)
@example([("I", "\t" * 70), ("can't", " ")], "same", 500)  # a window that starts inside the whitespace after "I"
@example([("x", " "), ("I", " " * 40), ("won't", " ")], "upper", 300)
def test_the_refusal_shortcut_never_changes_the_answer(pieces, case, padding):
    from assay.designs.staged.judges._evidence import _REFUSAL, refuses

    # Neutral padding makes the text long enough that the windows are searched, not the whole text.
    text = "." * padding + "".join(piece + gap for piece, gap in pieces) + "." * padding
    text = text if case == "same" else getattr(text, case)()
    assert refuses(text) == bool(_REFUSAL.search(text))
