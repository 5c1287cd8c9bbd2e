"""`python -m aotipre.cli` (as `python -m aotipre`)."""

from __future__ import annotations

import sys

from aotipre.cli import main

sys.exit(main())
