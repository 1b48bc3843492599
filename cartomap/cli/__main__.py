"""``python -m cartomap.cli``: how spawned jobs start the command line."""

import sys

from cartomap.cli import main

sys.exit(main())
