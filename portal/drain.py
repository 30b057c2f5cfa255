"""Request bodies read to their end, whatever the application read of them."""


class BodyDrained:
    """Reads what the application left unread of a request body once its response is done.

    A POST refused before its body is read (401, 403, 429) otherwise leaves the rest of the
    body on a keep-alive connection; gunicorn's gthread worker then takes those bytes for a new
    request and blocks one of its threads reading one that never comes (benoitc/gunicorn#3301):
    40 such requests at once left some unanswered for good."""

    def __init__(self, app) -> None:
        self.app = app

    def __call__(self, environ: dict, start_response):
        return _Drained(self.app(environ, start_response), environ.get("wsgi.input"))


class _Drained:
    def __init__(self, body, stream) -> None:
        self.body, self.stream = body, stream

    def __iter__(self):
        return iter(self.body)

    def close(self) -> None:
        try:
            if hasattr(self.body, "close"):
                self.body.close()
        finally:
            # gunicorn's wsgi.input stops at the request's end (Content-Length or last chunk).
            while self.stream is not None and self.stream.read(65536):
                pass
