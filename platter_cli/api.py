"""The portal's REST API over httpx, with its error bodies turned into CliErrors that name
the problem (and the field) and carry the exit code a script can test."""

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import httpx

from .config import Settings
from .errors import CliError, ExitCode

USER_AGENT = "platter-cli/1"
RETRIES_WHEN_THROTTLED = 3
LONGEST_THROTTLE_WAIT = 60.0


class Api:
    """One portal, one token. Paths are relative to /api/v1/."""

    def __init__(self, settings: Settings, flags: Mapping[str, str] | None = None) -> None:
        if not settings.url or not settings.token:
            raise CliError(
                "not logged in: run `platter login` (or set PLATTER_URL and PLATTER_TOKEN)",
                ExitCode.AUTH,
            )
        self.url = settings.url
        self.flags = dict(flags or {})  # API field -> the option the user typed, for messages
        self.http = httpx.Client(
            base_url=f"{settings.url}/api/v1/",
            headers={
                "Authorization": f"Bearer {settings.token}",
                "User-Agent": USER_AGENT,
                "Accept": "application/json",
            },
            timeout=httpx.Timeout(30.0, connect=10.0),
        )

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params=params)

    def post(self, path: str, body: dict | None = None, **params: Any) -> Any:
        return self.request("POST", path, json=body if body is not None else {}, params=params)

    def put(self, path: str, body: dict) -> Any:
        return self.request("PUT", path, json=body)

    def delete(self, path: str, **params: Any) -> Any:
        return self.request("DELETE", path, params=params)

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self._send(method, path, **kwargs)
        if response.status_code == 204 or not response.content:
            return None
        return self._json(response)

    def pages(self, path: str, **params: Any) -> Iterator[dict]:
        """Every row of a paginated list, following `next`."""
        page = self.get(path, page_size=500, **params)
        while True:
            yield from page["results"]
            if not page.get("next"):
                return
            page = self._json(self._send("GET", page["next"]))

    @contextmanager
    def stream_lines(
        self, path: str, params: dict[str, Any], longest_silence: float
    ) -> Iterator[Iterator[str]]:
        """A text/plain answer line by line as the portal sends it (the logs' follow); the
        portal may say nothing for `longest_silence` seconds."""
        timeout = httpx.Timeout(30.0, connect=10.0, read=longest_silence + 30.0)
        # Accept stays JSON: the lines come as text/plain anyway, errors as the API's JSON.
        request = self.http.build_request("GET", path, params=params, timeout=timeout)
        try:
            response = self.http.send(request, stream=True)
        except httpx.HTTPError as error:
            raise self._unreachable(error) from None
        try:
            if response.status_code >= 400:
                response.read()
                raise self._error(response)
            yield self._lines(response)
        finally:
            response.close()

    def _lines(self, response: httpx.Response) -> Iterator[str]:
        try:
            yield from response.iter_lines()
        except httpx.HTTPError as error:
            raise self._unreachable(error) from None

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        for attempt in range(RETRIES_WHEN_THROTTLED + 1):
            try:
                response = self.http.request(method, path, **kwargs)
            except httpx.HTTPError as error:
                raise self._unreachable(error) from None
            if response.status_code != 429 or attempt == RETRIES_WHEN_THROTTLED:
                break
            time.sleep(min(_retry_after(response), LONGEST_THROTTLE_WAIT))
        if response.status_code >= 400:
            raise self._error(response)
        return response

    def _json(self, response: httpx.Response) -> Any:
        try:
            return response.json()
        except ValueError:
            raise CliError(
                f"{response.request.url} answered {response.status_code} with "
                f"{response.headers.get('content-type', 'no content type')}, not the API's "
                f"JSON: is {self.url} a Platter portal?",
                ExitCode.AUTH,
            ) from None

    def _unreachable(self, error: httpx.HTTPError) -> CliError:
        what = type(error).__name__
        detail = str(error) or what
        return CliError(
            f"cannot reach the portal at {self.url}: {detail}",
            ExitCode.AUTH,
            {"error": "unreachable", "message": f"{what}: {detail}"},
        )

    def _error(self, response: httpx.Response) -> CliError:
        return api_error(response, self.url, self.flags)


def api_error(response: httpx.Response, url: str, flags: Mapping[str, str]) -> CliError:
    """The API's error body as a message a user can act on, with its exit code."""
    status = response.status_code
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict) or "message" not in body:
        text = response.text.strip() if _is_text(response) else ""
        body = {
            "status": status,
            "error": "http_error",
            "message": text or f"{response.request.url} answered {status} {response.reason_phrase}",
        }
        if status == 404:
            body["message"] += f" (is {url} a Platter portal?)"
    message = str(body["message"])
    fields = body.get("fields") or {}
    if fields:
        named = [f"{_flag(name, flags)}: {text}" for name, text in fields.items()]
        lead = "invalid request" if body.get("error") == "invalid" else message
        message = f"{lead}: " + "; ".join(named)
    if status == 401:
        message = f"the portal refused the token: {message}. Log in again with `platter login`"
        return CliError(message, ExitCode.AUTH, body)
    if status == 403 and body.get("error") == "quota_exceeded":
        return CliError(f"over quota: {message}", ExitCode.QUOTA, body)
    if status == 404:
        return CliError(message, ExitCode.NOT_FOUND, body)
    if status == 429:
        wait = body.get("retry_after") or response.headers.get("Retry-After")
        return CliError(f"{message} (try again in {wait} s)", ExitCode.REFUSED, body)
    if status >= 500:
        return CliError(f"the portal failed ({status}): {message}", ExitCode.AUTH, body)
    return CliError(message, ExitCode.REFUSED, body)


def _is_text(response: httpx.Response) -> bool:
    """A short plain-text answer (an error as text/plain) is worth showing as it is."""
    plain = response.headers.get("content-type", "").startswith("text/plain")
    return plain and len(response.content) < 2000


def _flag(field: str, flags: Mapping[str, str]) -> str:
    flag = flags.get(field)
    return f"{flag} ({field})" if flag and flag.lstrip("-") != field else flag or field


def _retry_after(response: httpx.Response) -> float:
    try:
        return max(float(response.headers.get("Retry-After", "1")), 0.5)
    except ValueError:
        return 1.0
