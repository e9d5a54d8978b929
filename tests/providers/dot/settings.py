"""Django settings for the django-oauth-toolkit OpenID Provider the tests run.

Set up as DOT's documentation says (OIDC tutorial, settings reference): OIDC on with an RSA
signing key, PKCE required (DOT's default), refresh tokens rotated with reuse protection, the
device authorization grant's verification URI, Django's own login form. Per run values come
as JSON in $KUBETRAY_DOT_SETTINGS (see serve.py): the database, the key, the token lifetimes.
"""

import json
import os
from pathlib import Path

RUN = json.loads(os.environ.get("KUBETRAY_DOT_SETTINGS", "{}"))
HERE = Path(__file__).resolve().parent

SECRET_KEY = RUN.get("secret_key", "kubetray-tests-only")
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
ROOT_URLCONF = "tests.providers.dot.urls"
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "oauth2_provider",
    "tests.providers.dot.idp",
]
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": RUN.get("db", ":memory:")}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
LOGIN_URL = "/accounts/login/"
# A fast hasher: these users live for one test; the default PBKDF2 costs ~0.3 s per login.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_RSA_PRIVATE_KEY": RUN.get("rsa_private_key", ""),
    "SCOPES": {
        "openid": "OpenID Connect scope",
        "email": "Your email address",
        "profile": "Your name",
    },
    "OAUTH2_VALIDATOR_CLASS": "tests.providers.dot.idp.validators.ClaimsValidator",
    "PKCE_REQUIRED": True,
    "ACCESS_TOKEN_EXPIRE_SECONDS": RUN.get("access_ttl", 3600),
    "ID_TOKEN_EXPIRE_SECONDS": RUN.get("id_ttl", 3600),
    "ROTATE_REFRESH_TOKEN": True,
    "REFRESH_TOKEN_REUSE_PROTECTION": True,
    "REFRESH_TOKEN_GRACE_PERIOD_SECONDS": 0,
    "OAUTH_DEVICE_VERIFICATION_URI": RUN.get("base", "") + "/o/device/",
    "OAUTH_DEVICE_VERIFICATION_URI_COMPLETE": RUN.get("base", "")
    + "/o/device/?user_code={user_code}",
    "DEVICE_FLOW_INTERVAL": RUN.get("device_interval", 5),
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stderr": {"class": "logging.StreamHandler"}},
    "loggers": {
        "oauth2_provider": {"handlers": ["stderr"], "level": "DEBUG"},
        "django.server": {"handlers": ["stderr"], "level": "INFO"},
    },
}
