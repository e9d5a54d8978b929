"""Kinds of login kubetray does, one package each (see docs/architecture.md)."""
