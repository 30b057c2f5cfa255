"""The demo product (platter/lab-base): busybox web servers whose disks hold a page each,
nothing another member needs. Its workers come and go without a drain."""

from ..base import BasePlugin


class DemoPlugin(BasePlugin):
    name = "demo"
    title = "demo (workers added and removed as they are)"
    resizable = ("worker",)


PLUGIN = DemoPlugin()
