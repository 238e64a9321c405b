import sys

from ortop.cli.main import main

sys.exit(main())
