import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.dev")


def with_websockets(http_application):
    """Django serves HTTP (and lifespan); its handler takes no websocket, so those go to the
    proxy's, which serves them on a cluster's UI host only (Jupyter's kernels)."""
    from apps.proxy import websocket  # after Django is set up

    async def application(scope, receive, send) -> None:
        if scope["type"] == "websocket":
            await websocket.application(scope, receive, send)
        else:
            await http_application(scope, receive, send)

    return application


application = with_websockets(get_asgi_application())
