"""django-oauth-toolkit with OpenID Connect, set up the way its documentation says."""
