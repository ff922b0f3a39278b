"""`python -m fastprep COMMAND`; see fastprep/tools/cli/_commands.py."""

import sys

from fastprep.tools.cli._commands import main

if __name__ == "__main__":
    sys.exit(main())
