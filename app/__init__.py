"""kubetray: log in to Kubernetes clusters from the desktop."""

from exec_helper.version import VERSION as __version__

__all__ = ["__version__"]
