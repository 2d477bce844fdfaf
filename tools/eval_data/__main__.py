"""`python -m tools.eval_data ...` (from the repository root)."""

import sys

from tools.eval_data.cli import main

sys.exit(main())
