"""``python -m echomq.cli``: the ``echomq`` command."""

import sys

from echomq.cli import main

sys.exit(main())
