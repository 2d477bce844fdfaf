"""`python -m tools.base_model ...` (from the repository root)."""

import sys

from tools.base_model.cli import main

sys.exit(main())
