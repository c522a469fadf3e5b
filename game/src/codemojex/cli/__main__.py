"""``python -m codemojex.cli``: the ``codemojex`` command, as the console script runs it."""

import sys

from codemojex.cli import main

sys.exit(main())
