"""`python -m fastprep COMMAND`; see fastprep/tools/cli/commands.py."""

import sys

from fastprep.tools.cli.commands import main

if __name__ == "__main__":
    sys.exit(main())
