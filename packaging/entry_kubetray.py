"""Entry point of the bundled kubetray (tray app, agent and command line)."""

import sys

from app.cli import main

sys.exit(main())
