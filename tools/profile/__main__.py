"""`python -m tools.profile ...` (from the repository root)."""

import sys

from tools.profile.cli import main

sys.exit(main())
