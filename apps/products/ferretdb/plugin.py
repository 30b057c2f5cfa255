"""FerretDB standing in for MongoDB: each member is an independent server with its own data
(no replica set), so members are never added or removed."""

from ..base import BasePlugin, ResizeAsk


class FerretDBPlugin(BasePlugin):
    name = "ferretdb"
    title = "FerretDB (independent members: no resize)"

    def resizable_roles(self, roles: dict[str, bool]) -> list[str]:
        return []

    def resize_refusal(self, ask: ResizeAsk) -> str | None:
        return (
            "FerretDB clusters cannot be resized: its members are independent servers, "
            "each with its own data"
        )


PLUGIN = FerretDBPlugin()
