import sys

from dspsim.cli import main

sys.exit(main())
