"""``python -m ember demo`` and friends (see ember.report.cli)."""
from ember.report.cli import main

raise SystemExit(main())
