"""kubetray: log in to Kubernetes clusters from the desktop."""

__version__ = "0.1.0"
