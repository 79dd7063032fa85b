"""``python -m assay.cli``."""

import sys

from . import main

sys.exit(main())
