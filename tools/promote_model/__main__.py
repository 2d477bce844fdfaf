"""`python -m tools.promote_model ...` (from the repository root)."""

import sys

from tools.promote_model.cli import main

sys.exit(main())
