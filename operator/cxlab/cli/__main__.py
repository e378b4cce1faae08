"""`python -m cxlab.cli`: as the `cxlab` script (the operator image's entry point)."""

import sys

from cxlab.cli import main

sys.exit(main())
