"""`python local/servers/llm_endpoint ...` or `python -m local.servers.llm_endpoint ...`: see the package."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
# Run as a folder, Python puts the package folder first on sys.path; the repository root goes there instead,
# so `stacks` imports and no module here shadows a library's (e.g. the standard library's `http`).
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path[0] = str(ROOT)
elif str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from local.servers.llm_endpoint.launcher import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
