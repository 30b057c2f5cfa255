"""One GET through an ASGI application as a server would hand it over, with no server around
it: bench/api's in-process figures and the ASGI tests send their requests this way."""

import asyncio


async def asgi_get(
    application, path: str, headers: dict[str, str], host: str = "testserver"
) -> tuple[int, dict[bytes, bytes], bytes]:
    """Status, headers and body of one GET; the client stays connected until the answer's
    last body part is sent, as a real one would."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", host.encode())]
        + [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "client": ("127.0.0.1", 50000),
        "server": (host, 80),
    }
    sent: list[dict] = []
    answered = asyncio.Event()
    received: list[bool] = []

    async def receive() -> dict:
        if not received:
            received.append(True)
            return {"type": "http.request", "body": b"", "more_body": False}
        await answered.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body"):
            answered.set()

    await application(scope, receive, send)
    start = sent[0]
    return start["status"], dict(start["headers"]), b"".join(m.get("body", b"") for m in sent[1:])
