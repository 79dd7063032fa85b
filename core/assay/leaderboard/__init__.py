"""The leaderboard: tracks packs declare, bundles a registry accepts, and the static site built from them.

* :mod:`.tracks`: a pack's tracks and the entries a bundle gives each;
* :mod:`.submit`: :func:`submit_bundle`, which accepts only what it can verify;
* :mod:`.site`: :func:`build_site`, pages ranked with Wilson intervals and paired McNemar tests.

The CLI is ``assay leaderboard submit`` and ``assay leaderboard build``.
"""

from __future__ import annotations

from .site import RankedEntry, build_site, rank_entries
from .submit import Submission, read_index, submit_bundle
from .tracks import Entry, Track, coverage_problems, entries_for, tracks_of

__all__ = [
    "Entry",
    "RankedEntry",
    "Submission",
    "Track",
    "build_site",
    "coverage_problems",
    "entries_for",
    "rank_entries",
    "read_index",
    "submit_bundle",
    "tracks_of",
]
