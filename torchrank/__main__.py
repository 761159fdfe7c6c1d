"""``python -m torchrank``: the command line."""

import sys

from torchrank.cli import main

sys.exit(main())
