"""``python -m dspsim``: the command line, as ``dspsim`` is."""

import sys

from dspsim.cli import main

sys.exit(main())
