"""How drf-spectacular describes the token authentication classes in the OpenAPI schema."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "apps.tokens.authentication.BearerTokenAuthentication"
    name = "bearerToken"

    def get_security_definition(self, auto_schema) -> dict:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A personal API token: `manage.py issue_token USER` or /tokens/",
        }


class HeaderTokenScheme(OpenApiAuthenticationExtension):
    target_class = "apps.tokens.authentication.HeaderTokenAuthentication"
    name = "xAuthToken"

    def get_security_definition(self, auto_schema) -> dict:
        return {"type": "apiKey", "in": "header", "name": "x-auth-token"}
