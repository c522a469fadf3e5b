"""``python -m echomq.cli``: the ``echomq`` command."""

import sys

from echomq.cli.commands import main

sys.exit(main())
