import dataclasses

from django.core.management.base import BaseCommand, CommandError

from apps.lab import lab
from apps.lab.host import LabError
from apps.lab.nodes import current, lab_nodes
from apps.lab.products import prepare_product_images, recipes_to_build, stage_product_images


class Command(BaseCommand):
    help = (
        "Turn this machine into a lab of Platter nodes: up, down or status; stage only fetches"
        " and packs the build contexts of the product images the lab's registry cache lacks"
        " (what `up` would build); images puts"
        " the product images on the running lab's nodes, telling the catalog how far it got."
    )

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["up", "down", "status", "stage", "images"])
        parser.add_argument(
            "--without-product-images",
            action="store_true",
            help="up: only what the demo needs; `lab images` prepares the products after",
        )

    def handle(self, *args, action: str, without_product_images: bool = False, **options):
        try:
            if action == "stage":
                stage_product_images(recipes_to_build(), log=self.stdout.write)
                return
            if action == "images":
                prepare_product_images(lab_nodes(), log=self.stdout.write)
                return
            if action == "up":
                spec = current()
                if without_product_images:
                    spec = dataclasses.replace(spec, products=())
                lab.up(log=self.stdout.write, spec=spec)
            elif action == "down":
                lab.down(log=self.stdout.write)
            for row in lab.status():
                self.stdout.write(
                    f"{row['node']:8} {row['endpoint']:28} dockerd {row['dockerd']}, "
                    f"{row['disks']} disks mounted, data-root {row['data_root']}"
                )
        except LabError as exc:
            raise CommandError(str(exc)) from exc
        except KeyboardInterrupt:
            # `up` took back what it had started, `down` finished first (apps/lab/teardown).
            raise CommandError(f"lab {action} interrupted") from None
