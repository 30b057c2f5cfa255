"""The layers, read from the code: apps/ never imports workers/ (the workers import the apps
and run their services), and only the node layer (apps/nodes) talks to Docker through the
docker SDK (tests and bench/ may inspect the engines directly)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def modules(folder: str) -> list[Path]:
    return [p for p in (ROOT / folder).rglob("*.py") if "tests" not in p.parts]


def test_no_app_imports_the_workers():
    arrows = [str(p.relative_to(ROOT)) for p in modules("apps") if "workers" in imports(p)]
    assert arrows == []


def test_only_the_node_layer_imports_the_docker_sdk():
    users = {
        str(p.relative_to(ROOT))
        for folder in ("apps", "workers", "portal")
        for p in modules(folder)
        if "docker" in imports(p)
    }
    assert sorted(u for u in users if not u.startswith("apps/nodes/")) == []
    assert any(u.startswith("apps/nodes/") for u in users)
