"""Artifacts accepted by their sha256 where nothing kept re-derives all of them.

Reference artifacts (pinned in `artifacts.reference`, checked by `references`) are rebuilt from
the published run's table of figures and hold no raw data: only the committed files are
reference, so relabelling an artifact `reference` passes nothing. Legacy ladders were measured before CPU readings were kept beside
the samples (and some before the stability figures existed): their rungs are recomputed from
their samples, the CPU share each rung recorded is taken as recorded, and a stability figure the
artifact left null stays unjudged. Anything else measured must carry its raw record.
"""

from __future__ import annotations

from typing import Final

# sha256 -> where it was measured: the committed H200 ladders (measurements/, measurements/lab/h200-run*/).
LEGACY_QMAX_SHA256: Final[dict[str, str]] = {
    "e0ad7d0316672f3ccddcdeaa50f4021a805b5056a0f2eda25c4cdeab4dad8ce1": "H200 run 1, serial",
    "7ab668e198b70380957051bcecc26d382de48605e9deb262f3b9bd7a6663e435": "H200 run 1, batched",
    "02c9618f13090b79f5df9b3b465fdf0e3ce9a8b492ae058ff5daa3f91868662f": "H200 run 2, serial",
    "96df18325a2b13a9062b322849e75e249ca4102cac79dabdd748ef6983094973": "H200 run 2, batched",
    "5c907529bcee7e84c89f0d9a37c464d059296483ce72ee7cb53316d685ff6536": "H200 run 3, batched",
    "223f44949d754046e94f54902622ca6cccf1d57a807335b2c412dafa0c3322d8": "H200 run 3, serial",
    "89000bc0a369fd19d24da8fcef01bafcd16c8fc5022d56ae2ff72f253a506bc2": (
        "H200 run 6, serial, engine process"
    ),
    "d5b8395568483054a9a41230638ee55842b43b7e240ae3a5af821fe6c75919fd": "H200 run 6, batched",
    "86f30ca085d1761d91bb1a422c90364d4b1d3d8da9a7ed86b92b8d86e99aa759": "H200 run 6, serial",
    "222ee138a8544260e846cfca29fdf7befb45c94144a1f5c6df346e3789c1c797": (
        "H200 run 6, batched, engine process"
    ),
}
