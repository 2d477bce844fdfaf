"""`python -m tools.cost ...` (from the repository root)."""

import sys

from tools.cost.cli import main

sys.exit(main())
