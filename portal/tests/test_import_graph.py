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


def test_the_catalog_modules_import_each_other_without_a_cycle():
    """apps/catalog's own imports (top-level and deferred ones alike) form no cycle."""
    folder = ROOT / "apps" / "catalog"
    graph = {p.stem: _catalog_imports(p) for p in folder.glob("*.py")}
    cycles = [path for start in graph for path in _cycles_from(start, graph)]
    assert cycles == []


def _catalog_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level == 1 and module:
                found.add(module.split(".")[0])
            elif node.level == 1:  # from . import x
                found |= {alias.name for alias in node.names}
            elif module.startswith("apps.catalog."):
                found.add(module.split(".")[2])
            elif module == "apps.catalog":
                found |= {alias.name for alias in node.names}
    return found


def _cycles_from(start: str, graph: dict[str, set[str]]) -> list[list[str]]:
    """Paths from `start` back to itself."""
    found, stack = [], [(start, [start])]
    while stack:
        node, path = stack.pop()
        for nxt in graph.get(node, set()):
            if nxt == start:
                found.append([*path, start])
            elif nxt not in path:
                stack.append((nxt, [*path, nxt]))
    return found
