"""Rebuild the registry's accepted leaderboard bundles from real runs of the embedded model.

Two configurations of Gemma 3 270M (the `local` endpoint) on the example
pack's `prompt-attacks` track, seeds 0 and 1: without a defense (D0) and with
the spotlighting defense (D3). Each run is submitted with
`assay leaderboard submit`, which validates it completely (exec replay,
re-derived verdicts, the registered pack, no scripted endpoint, the track
covered), stores it by digest and lists it in registry/bundles/index.json,
at a fixed submission time so that rebuilding changes nothing that did not
change. The D3 bundle is signed with a key made for the purpose (its public
half is in the bundle's signature.json; the private key is thrown away).

    make registry-bundles          # or: .venv/bin/python scripts/registry_bundles.py [--out DIR]

Until the embedded default is a model that answers, both submissions are refused: the pretrained Gemma reads
the system prompt (and the D3 text) back, and a degenerate endpoint cannot rank (issue 30). The script then
exits 1 with the submission's reasons, and the registry stays as it is.

Takes about three minutes on 2 cores. Then `assay leaderboard build
--registry registry --out site/leaderboard` draws the site.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUNS = (("D0", "2026-12-01T12:00:00Z", False), ("D3", "2026-12-01T12:05:00Z", True))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--registry", type=Path, default=REPO / "registry", help="registry to submit to")
    args = parser.parse_args()
    assay = [sys.executable, "-m", "assay.cli"]
    # The runs record their times: at the submission's fixed time, rebuilding changes nothing that did not change.
    os.environ.setdefault("SOURCE_DATE_EPOCH", "1764590400")
    index = args.registry / "bundles" / "index.json"
    previous = json.loads(index.read_text()) if index.exists() else {"spec_version": "1.0", "bundles": []}
    for stored in previous["bundles"]:  # start again from an empty board: the runs below are the whole of it
        (args.registry / stored["file"]).unlink(missing_ok=True)
    index.write_text(json.dumps({"spec_version": "1.0", "bundles": []}) + "\n")
    with tempfile.TemporaryDirectory(prefix="assay-registry-") as scratch:
        for defense, at, sign in RUNS:
            out = Path(scratch) / defense
            subprocess.run(
                [*assay, "run", "--pack", "example", "--endpoint", "local", "--stages", "semantic,audit",
                 "--seeds", "0,1", "--defense", defense, "--out", str(out), "--quiet"],
                check=True,
            )  # fmt: skip
            bundle = out / "bundle"
            if sign:
                key = Path(scratch) / "key.pem"
                subprocess.run([*assay, "keygen", str(key)], check=True)
                subprocess.run([*assay, "sign", str(bundle), "--key", str(key)], check=True)
            submitted = subprocess.run(
                [*assay, "leaderboard", "submit", str(bundle), "--registry", str(args.registry), "--at", at]
            )
            if submitted.returncode != 0:
                return submitted.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
