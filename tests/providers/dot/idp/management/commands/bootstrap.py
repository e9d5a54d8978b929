"""`manage.py bootstrap`: the demo user and the clients, registered as kubelogin's guide says.

- ``kubectl``: a public native client (no secret), authorization code + PKCE, with the RFC 8252
  loopback redirect ``http://127.0.0.1/`` (DOT lets the port vary for 127.0.0.1, not the path).
- ``kubelogin``: the same, registered exactly as int128/kubelogin's setup guide says:
  ``http://localhost:8000`` and ``http://localhost:18000`` (DOT matches these byte for byte).
- ``kubectl-device``: a public client for the device authorization grant (RFC 8628).
Refresh tokens come with every authorization code and device grant (DOT issues them to all).
"""

from typing import Any

from django.contrib.auth.models import Group, User
from django.core.management.base import BaseCommand
from oauth2_provider.models import Application


class Command(BaseCommand):
    help = "Create the demo user and the kubetray test clients."

    def handle(self, *args: Any, **options: Any) -> None:
        user = User.objects.create_user(
            "alice", "alice@example.test", "alice-password", first_name="Alice"
        )
        for name in ("devs", "team-alice"):
            user.groups.add(Group.objects.create(name=name))
        common = {
            "client_type": Application.CLIENT_PUBLIC,
            "algorithm": Application.RS256_ALGORITHM,
            "user": user,
            "client_secret": "",
        }
        Application.objects.create(
            name="kubectl",
            client_id="kubectl",
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris="http://127.0.0.1/",
            **common,
        )
        Application.objects.create(
            name="kubelogin",
            client_id="kubelogin",
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris="http://localhost:8000 http://localhost:18000",
            **common,
        )
        Application.objects.create(
            name="kubectl-device",
            client_id="kubectl-device",
            authorization_grant_type=Application.GRANT_DEVICE_CODE,
            redirect_uris="",
            **common,
        )
