"""A CESGA product written for the tests: a master plus `size` workers, each worker with
`disks` dedicated disks at /data/K, in the template shape of CESGA's PaaS (joiner, range)."""

import json

from rest_framework.test import APIClient

BASE = "/bigdata/api/v1"
LOOP = "trap 'exit 0' TERM; while true; do sleep 1; done"  # the lab image's sh exits at once

TEMPLATE = """{% set comma = joiner(",") %}
{
  "dnsname": "{{ clusterid }}",
  "nodes": {
    "master": {
      "docker_image": "platter/lab-base:1",
      "docker_opts": "-e ROLE=master -t --hostname master",
      "cpu": 1, "mem": 64,
      "disks": {"disk1": {"destination": "/data/1"}},
      "networks": {"eth0": {"type": "dynamic", "networkname": "storage"}},
      "command": "LOOP"
    },
    {% for n in range(opts.size) %}
    {{ comma() }} "worker{{ n }}": {
      "docker_image": "platter/lab-base:1",
      "docker_opts": "-e ROLE=worker -e GREETING={{ opts.greeting }}",
      "cpu": {{ opts.cpu }}, "mem": {{ opts.mem }},
      "disks": { {% set c = joiner(",") %}{% for k in range(1, opts.disks + 1) %}
        {{ c() }} "disk{{ k }}": {"destination": "/data/{{ k }}"}{% endfor %}
      },
      "networks": {"eth0": {"type": "dynamic", "networkname": "storage"}},
      "command": "LOOP"
    }
    {% endfor %}
  },
  "services": {
    "head": {"nodes": ["master"]},
    {% set c = joiner(",") %}
    "workers": {"nodes": [{% for n in range(opts.size) %}{{ c() }}"worker{{ n }}"{% endfor %}]}
  }
}
""".replace("LOOP", LOOP.replace("'", "\\u0027"))

OPTIONS = {
    "required": {"size": 2},
    "optional": {"cpu": 1, "mem": 64},
    "advanced": {"disks": 2, "greeting": "hello"},
    "descriptions": {
        "size": "Number of workers",
        "cpu": "Cores per worker",
        "mem": "Memory per worker (MB)",
        "disks": "Disks per worker",
        "greeting": "Text the workers get as GREETING",
    },
}

ORCHESTRATOR = "from fabric.api import task\n\n@task\ndef start():\n    run('echo configured')\n"


def register(
    client: APIClient,
    name: str = "tiny",
    version: str = "1.0",
    template=TEMPLATE,
    options=OPTIONS,
    orchestrator=ORCHESTRATOR,
) -> list:
    """CESGA's four calls, as its register.sh makes them; the answers, in order."""
    product = f"{BASE}/products/{name}/{version}"
    answers = [
        client.post(
            f"{BASE}/products",
            {
                "name": name,
                "version": version,
                "description": "A tiny test product",
                "logo_url": "https://example.org/tiny.png",
            },
            format="json",
        ),
        client.put(
            f"{product}/options",
            json.dumps(options),
            content_type="application/x-www-form-urlencoded",
        ),
        client.put(f"{product}/template", template, content_type="application/json"),
        client.put(f"{product}/orchestrator", orchestrator, content_type="text/plain"),
    ]
    return answers
