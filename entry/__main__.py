"""`python -m aios_ledger.entry`: the console script."""

from aios_ledger.entry import main

raise SystemExit(main())
