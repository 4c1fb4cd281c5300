"""``python -m flows.cli``: the ``prepflow`` command."""

import sys

from flows.cli import main

sys.exit(main())
