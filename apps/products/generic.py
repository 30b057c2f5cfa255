"""The plugin of a definition that names none (the CESGA import, an admin's own version):
it resizes only roles that keep no state and has no job kinds, no drain, no notebook. A
product that resizes stateful members safely needs a plugin of its own."""

from .base import BasePlugin


class GenericPlugin(BasePlugin):
    name = "generic"
    title = "generic (no resize of roles with disks, no jobs)"


PLUGIN = GenericPlugin()
