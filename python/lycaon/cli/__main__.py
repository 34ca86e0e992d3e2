"""``python -m lycaon.cli``: the ``lycaon`` command."""

import sys

from lycaon.cli import main

if __name__ == "__main__":
    sys.exit(main())
