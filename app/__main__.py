"""``python -m app`` runs the kubetray command line."""

import sys

from app.cli import main

sys.exit(main())
