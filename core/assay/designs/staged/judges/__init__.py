"""Judges: what labels a stage's outcome from the agent's final response.

``rule`` is deterministic pattern matching; ``llm`` asks any endpoint with a
versioned prompt and strict JSON parsing. Both produce the same outcome shapes.
"""
