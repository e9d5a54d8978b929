"""The OpenID Connect engine: discovery, the grants (authlib), id_token checks (joserfc)."""
