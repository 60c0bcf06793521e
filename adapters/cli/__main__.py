"""`python -m adapters.cli`: the `chatmem` command without its installed script."""

import sys

from adapters.cli import main

sys.exit(main())
