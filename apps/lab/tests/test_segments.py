"""The lab's segments never take over a route something else on the machine holds."""

import ipaddress
import uuid

import pytest

from apps.lab import host, segments

pytestmark = pytest.mark.lab


def test_a_subnet_routed_elsewhere_is_refused_with_a_clear_reason():
    bridge = f"plt{uuid.uuid4().hex[:8]}"
    subnet = "10.215.77.0/24"
    host.ensure_bridge(bridge)
    try:
        host.run("ip", "route", "add", subnet, "dev", bridge)
        segment = segments.Segment(0, ipaddress.ip_network(subnet), "plzzzzzz")
        with pytest.raises(host.LabError, match=f"already routed through {bridge}: remove"):
            segments.refuse_foreign_route(segment)
        route = host.run("ip", "-o", "route", "show", subnet).stdout
        assert f"dev {bridge}" in route  # left as it was
    finally:
        host.delete_link(bridge)


def test_the_host_routes_each_segment_through_its_own_shim():
    for segment in segments.all_segments():
        route = host.run("ip", "route", "get", str(segment.subnet[20])).stdout
        assert f"dev {segment.shim} " in route, route
