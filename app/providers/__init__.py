"""Kinds of login (OIDC, Microsoft Entra ID, ...), each in a package of its own."""
