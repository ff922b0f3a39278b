"""`python -m fastprep COMMAND`; see fastprep/cli.py."""

import sys

from fastprep.tools.cli.commands import main

if __name__ == "__main__":
    sys.exit(main())
