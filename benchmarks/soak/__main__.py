"""`python -m benchmarks.soak` (what `scripts/soak` runs)."""

from benchmarks.soak.run import main

raise SystemExit(main())
