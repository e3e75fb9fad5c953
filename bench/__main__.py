"""`python -m bench [--quick]`: every part, one table, bench/results/latest.json."""

from .run import main

raise SystemExit(main())
