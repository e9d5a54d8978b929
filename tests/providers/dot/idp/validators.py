"""Claims in the id_token, the way DOT's OIDC docs show (get_additional_claims)."""

from typing import Any, ClassVar

from oauth2_provider.oauth2_validators import OAuth2Validator


class ClaimsValidator(OAuth2Validator):  # type: ignore[misc]
    oidc_claim_scope: ClassVar[dict[str, str]] = {
        **OAuth2Validator.oidc_claim_scope,
        "groups": "profile",
    }

    def get_additional_claims(self, request: Any) -> dict[str, Any]:
        user = request.user
        return {
            "email": user.email,
            "email_verified": True,
            "name": user.get_full_name() or user.username,
            "preferred_username": user.username,
            "groups": sorted(g.name for g in user.groups.all()),
        }
