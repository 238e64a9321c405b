"""``python -m ortop``: the same as the ``ortop`` command."""

import sys

from ortop.cli.main import main

sys.exit(main())
