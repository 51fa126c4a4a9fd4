"""``python -m tools.ci.nbval_report``: the command line of `tools.ci.nbval_report.cli`."""
import sys

from .cli import main

sys.exit(main())
