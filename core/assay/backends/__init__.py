"""Model backends: ``openai`` (any OpenAI-compatible server), ``local`` (the embedded
Gemma 3 270M via llama-cpp-python) and ``scripted`` (deterministic reference agents).

A backend plugin makes endpoints; an endpoint answers :class:`~assay.engine.messages.ChatRequest`
with :class:`~assay.engine.messages.ChatResponse` and describes itself for the run manifest.
"""
