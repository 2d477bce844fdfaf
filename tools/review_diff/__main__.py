"""`python -m tools.review_diff ...` (from the repository root)."""

import sys

from tools.review_diff.cli import main

sys.exit(main())
