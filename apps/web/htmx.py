from django.http import HttpRequest


def htmx_partial(request: HttpRequest) -> bool:
    """True when htmx asks for a fragment to swap in (not a boosted full-page request)."""
    htmx = getattr(request, "htmx", None)
    if not htmx:
        return False
    return not htmx.boosted
