"""``python -m benchmarks`` is ``python -m benchmarks.run`` (see its docstring)."""

import sys

from benchmarks.run import main

sys.exit(main())
