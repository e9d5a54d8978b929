"""Kubeconfig editing (minimal for now: add an OIDC user, cluster and context safely)."""
