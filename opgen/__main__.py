"""`python -m opgen` runs the command line."""

import sys

from opgen.cli import main

sys.exit(main())
