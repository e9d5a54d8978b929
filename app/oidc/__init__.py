"""The OpenID Connect engine (authlib + joserfc): discovery, the grants, id_token checks."""
