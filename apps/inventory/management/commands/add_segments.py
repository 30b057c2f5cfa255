"""manage.py add_segments POOL VLANS: isolated cluster networks, one per VLAN id."""

from django.core.management.base import BaseCommand, CommandError

from apps.inventory.services import SegmentError, add_segments


def vlan_range(text: str) -> range:
    first, _, last = text.partition("-")
    try:
        return range(int(first), int(last or first) + 1)
    except ValueError:
        raise CommandError(f"VLANS must look like 100-163 or 100, not {text!r}") from None


class Command(BaseCommand):
    help = (
        "Create one isolated cluster network per VLAN id, each the next subnet of POOL. "
        "Each cluster then holds a segment of its own (see the README's Networks section)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("pool", help="address pool to carve, e.g. 10.50.0.0/16")
        parser.add_argument("vlans", help="VLAN ids, e.g. 100-163")
        parser.add_argument("--prefix", type=int, default=24, help="subnet size (default /24)")

    def handle(self, *args, pool: str, vlans: str, prefix: int, **options) -> None:
        try:
            made = add_segments(pool, vlan_range(vlans), prefix)
        except SegmentError as error:
            raise CommandError(str(error)) from None
        for network in made:
            self.stdout.write(f"{network.name}: {network.subnet} on <parent>.{network.vlan}")
