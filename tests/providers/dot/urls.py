"""DOT under /o/ (its tutorial's layout), RFC 8414 metadata at the root, Django's login form."""

from django.urls import include, path
from oauth2_provider import urls as oauth2_urls

urlpatterns = [
    path("o/", include("oauth2_provider.urls", namespace="oauth2_provider")),
    # DOT's docs: mount the RFC 8414 metadata at the server root too.
    path("", include((oauth2_urls.metadata_urlpatterns, "oauth2_metadata"))),
    path("accounts/", include("django.contrib.auth.urls")),
]
