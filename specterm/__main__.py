import sys

from specterm.cli import main

sys.exit(main())
