"""A minimal OpenID Connect provider for the tests, on a real HTTP port: authorize (approves
whoever the test says is signing in), token (checks the client's secret, the redirect URI and
PKCE, issues an RS256 ID token), userinfo and JWKS. Tokens are signed with `cryptography`
directly, not with the library the portal verifies them with."""

import base64
import hashlib
import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlsplit

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

CLIENT_ID = "platter-portal"
CLIENT_SECRET = "client-secret-for-tests"
KEY_ID = "test-key-1"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _int(value: int) -> str:
    return b64url(value.to_bytes((value.bit_length() + 7) // 8, "big"))


class Provider:
    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        # The key ID tokens are signed with (a test swaps in another to forge one).
        self.signing_key = self.key
        # Who approves the next authorization request: the claims userinfo will answer.
        self.claims: dict = {}
        # Claims only the ID token carries, not userinfo (as some providers do with groups).
        self.id_token_claims: dict = {}
        # ID tokens name this audience (a test sets another one to play a token for another
        # client).
        self.audience = CLIENT_ID
        # ID tokens name this issuer when set (a test plays another provider's token).
        self.token_issuer: str | None = None
        self.codes: dict[str, dict] = {}
        self.tokens: dict[str, dict] = {}
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def issuer(self) -> str:
        return self.url

    def env(self) -> dict[str, str]:
        """The PLATTER_OIDC_* variables a site would set for this provider."""
        return self.env_for(self.url)

    @staticmethod
    def env_for(url: str) -> dict[str, str]:
        return {
            "PLATTER_OIDC_CLIENT_ID": CLIENT_ID,
            "PLATTER_OIDC_CLIENT_SECRET": CLIENT_SECRET,
            "PLATTER_OIDC_AUTHORIZATION_ENDPOINT": f"{url}/authorize",
            "PLATTER_OIDC_TOKEN_ENDPOINT": f"{url}/token",
            "PLATTER_OIDC_USERINFO_ENDPOINT": f"{url}/userinfo",
            "PLATTER_OIDC_JWKS_ENDPOINT": f"{url}/jwks",
            "PLATTER_OIDC_ISSUER": url,
        }

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()

    def sign(self, payload: dict) -> str:
        header = {"alg": "RS256", "typ": "JWT", "kid": KEY_ID}
        signing_input = ".".join(
            b64url(json.dumps(part).encode()) for part in (header, payload)
        ).encode()
        signature = self.signing_key.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input.decode()}.{b64url(signature)}"

    def jwks(self) -> dict:
        numbers = self.key.public_key().public_numbers()
        jwk = {
            "kty": "RSA",
            "use": "sig",
            "alg": "RS256",
            "kid": KEY_ID,
            "n": _int(numbers.n),
            "e": _int(numbers.e),
        }
        return {"keys": [jwk]}

    def authorize(self, query: dict[str, str]) -> str:
        """The redirect back to the client with a code for the current claims."""
        if query.get("client_id") != CLIENT_ID or query.get("response_type") != "code":
            raise ValueError("unknown client or response type")
        code = secrets.token_urlsafe(16)
        self.codes[code] = {**query, "claims": dict(self.claims), "id": dict(self.id_token_claims)}
        return f"{query['redirect_uri']}?{urlencode({'code': code, 'state': query['state']})}"

    def token(self, form: dict[str, str]) -> dict:
        grant = self.codes.pop(form.get("code", ""), None)
        if grant is None or form.get("client_secret") != CLIENT_SECRET:
            raise ValueError("invalid_grant")
        if form.get("client_id") != CLIENT_ID or form.get("redirect_uri") != grant["redirect_uri"]:
            raise ValueError("invalid_grant")
        challenge = b64url(hashlib.sha256(form.get("code_verifier", "").encode()).digest())
        if grant.get("code_challenge_method") != "S256" or challenge != grant["code_challenge"]:
            raise ValueError("invalid_grant (PKCE)")
        access_token = secrets.token_urlsafe(24)
        self.tokens[access_token] = grant["claims"]
        now = int(time.time())
        id_token = self.sign(
            {
                "iss": self.token_issuer or self.issuer,
                "aud": self.audience,
                "sub": grant["claims"].get("sub", ""),
                "iat": now,
                "exp": now + 300,
                "nonce": grant.get("nonce"),
                **grant["id"],
            }
        )
        return {
            "access_token": access_token,
            "token_type": "Bearer",
            "expires_in": 300,
            "id_token": id_token,
        }


def _handler(provider: Provider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _json(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            query = {key: values[0] for key, values in parse_qs(url.query).items()}
            if url.path == "/authorize":
                try:
                    location = provider.authorize(query)
                except ValueError as error:
                    return self._json(400, {"error": str(error)})
                self.send_response(302)
                self.send_header("Location", location)
                self.end_headers()
            elif url.path == "/jwks":
                self._json(200, provider.jwks())
            elif url.path == "/userinfo":
                bearer = self.headers.get("Authorization", "").removeprefix("Bearer ")
                claims = provider.tokens.get(bearer)
                if claims is None:
                    return self._json(401, {"error": "invalid_token"})
                self._json(200, claims)
            else:
                self._json(404, {"error": "not found"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
            if urlsplit(self.path).path != "/token":
                return self._json(404, {"error": "not found"})
            try:
                self._json(200, provider.token(form))
            except ValueError as error:
                self._json(400, {"error": str(error)})

        def log_message(self, format: str, *args: object) -> None:  # quiet test output
            pass

    return Handler
