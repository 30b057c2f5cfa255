"""An exec's output is bounded (issue 29, item 3): the worker reads at most the last
EXEC_OUTPUT_LIMIT bytes of what a command printed, with a line saying it was cut. On the lab."""

import pytest
from django.conf import settings

from apps import nodes
from apps.nodes import engine
from apps.nodes.client import EXEC_CUT, EXEC_OUTPUT_LIMIT

pytestmark = [pytest.mark.lab, pytest.mark.django_db]


@pytest.fixture
def box(lab_cleanup):
    """A running container of this run's site on a lab node: (node, its name)."""
    node = lab_cleanup[0]
    name = f"{settings.PLATTER_SITE}-exec-output"
    api = engine.cached(node).api
    labels = {"platter.site": settings.PLATTER_SITE}  # lab_cleanup removes it
    made = api.create_container(settings.LAB_IMAGE, ["sleep", "300"], name=name, labels=labels)
    api.start(made["Id"])
    return node, name


def test_a_long_output_is_cut_to_its_end_and_says_so(box):
    node, name = box
    print_much = f"head -c {4 * EXEC_OUTPUT_LIMIT} /dev/zero | tr '\\0' x; echo; echo the end"
    code, output = nodes.client(node).exec(name, ["sh", "-c", f"{print_much}; exit 3"], 60)
    assert code == 3  # the command's own exit code, not the cutting's
    assert output.startswith(EXEC_CUT.format(EXEC_OUTPUT_LIMIT))
    assert output.endswith("x\nthe end\n")
    assert len(output) <= EXEC_OUTPUT_LIMIT + 100


def test_a_short_output_comes_back_whole(box):
    node, name = box
    assert nodes.client(node).exec(name, ["echo", "hello"], 60) == (0, "hello\n")
