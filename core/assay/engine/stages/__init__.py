"""Stages: each turns one work item into one stage outcome of its row.

Stages keep the seeds' endpoints separate; none is folded into another. Every
stage is a registration (``register_stages``; the built-in ones by
the designs in ``assay.designs``). The engine runs the stages a case's
family supports, in the order :func:`stage_order` gives, and stops at the
first stage whose model call fails for good (the row then records the error).
"""

from __future__ import annotations

from ...stage_order import stage_order

# Each stage's module is imported by the plugin that registers it, when a run first calls it: importing this
# package (for the public StageContext, say) stays cheap.
__all__ = ["stage_order"]
