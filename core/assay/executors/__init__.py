"""Executors: run planned work items and hand each finished row to a sink.

``local`` runs them on an asyncio event loop in this process; ``ray`` runs
batches of them as Ray tasks on an existing or local Ray cluster. Both rebuild
the same :class:`~assay.engine.runtime.Runtime` from the same job, so they
produce identical rows.
"""
