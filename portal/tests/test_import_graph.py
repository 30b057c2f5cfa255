"""The layers, read from the code: apps/ never imports workers/ (the workers import the apps
and run their services), only the node layer (apps/nodes) talks to Docker through the docker
SDK (tests and bench/ may inspect the engines directly), every import between apps points
down the floors (FLOORS) with no circle, and no module of the repository's packages imports
itself back through others."""

import ast
from pathlib import Path

import pytest

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


@pytest.mark.parametrize("app", ["catalog", "clusters", "products"])
def test_an_apps_modules_import_each_other_without_a_cycle(app):
    """An app's own imports (top-level and deferred ones alike) form no cycle. The clusters
    app's admission pass and the releases that wake it meet through wakeup.py instead."""
    folder = ROOT / "apps" / app
    graph = {p.stem: _sibling_imports(p, app) for p in folder.glob("*.py")}
    cycles = [path for start in graph for path in _cycles_from(start, graph)]
    assert cycles == []


def _sibling_imports(path: Path, app: str) -> set[str]:
    """The modules of `app` that the module at `path` (one of them) imports."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level == 1 and module:
                found.add(module.split(".")[0])
            elif node.level == 1:  # from . import x
                found |= {alias.name for alias in node.names}
            elif module.startswith(f"apps.{app}."):
                found.add(module.split(".")[2])
            elif module == f"apps.{app}":
                found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {
                alias.name.split(".")[2]
                for alias in node.names
                if alias.name.startswith(f"apps.{app}.")
            }
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


# The floors, lowest first: an app imports only apps on its floor or below, and no circle runs
# through apps on one floor. audit and metrics record for every floor, and tasks is the bus
# every floor hands work to the workers through, by name; nodes talks to the engines and holds
# the portal CA; the product plugins (apps/products) sit under the catalog that names them
# and the clusters and workers that ask them, seeing clusters only through what they are
# handed; the exporter (/metrics) reads the clusters, the inventory and usage, so it
# sits with the other front doors; workers and the lab sit above all apps.
FLOORS = {
    "audit": 0,
    "metrics": 0,
    "tasks": 0,
    "nodes": 1,
    "inventory": 2,
    "accounts": 2,
    "tokens": 2,
    "products": 2,
    "catalog": 3,
    "clusters": 4,
    "jobs": 5,
    "usage": 5,
    "api": 6,
    "web": 6,
    "proxy": 6,
    "health": 6,
    "exporter": 6,
    "lab": 7,
    "workers": 7,
}


def app_imports(path: Path) -> set[str]:
    """The apps (and `workers`) a module imports, deferred and type-only imports included."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        for name in names:
            parts = name.split(".")
            if parts[0] == "apps" and len(parts) > 1:
                found.add(parts[1])
            elif parts[0] == "workers":
                found.add("workers")
    return found


def app_arrows() -> list[tuple[str, str, str]]:
    """(module, its app, the app it imports) for every import between two apps."""
    arrows = []
    for path in sorted([*modules("apps"), *modules("workers")]):
        rel = path.relative_to(ROOT)
        if "migrations" in rel.parts:
            continue
        source = "workers" if rel.parts[0] == "workers" else rel.parts[1]
        arrows += [(str(rel), source, target) for target in app_imports(path) if target != source]
    return arrows


def test_every_app_has_a_floor():
    apps = {p.name for p in (ROOT / "apps").iterdir() if (p / "__init__.py").exists()}
    assert apps | {"workers"} <= set(FLOORS)


def test_imports_point_down_the_floors():
    """Deferred and type-only imports count: a hook a higher app registers (a signal, an
    AppConfig.ready) is how a lower one reaches up."""
    upward = [
        f"{module} -> {target}"
        for module, source, target in app_arrows()
        if FLOORS[target] > FLOORS[source]
    ]
    assert upward == []


def test_the_apps_form_no_circle():
    graph: dict[str, set[str]] = {}
    for _module, source, target in app_arrows():
        graph.setdefault(source, set()).add(target)
    cycles = [path for start in graph for path in _cycles_from(start, graph)]
    assert cycles == []


# --------------------------------------------------------------- circles between modules

PACKAGES = ("apps", "workers", "portal", "platter_cli", "bench")
# Circles that exist and are being taken apart: each may shrink, not grow, and its entry goes
# once it is gone. None now: every circle fails the test.
ALLOWED_CIRCLES: list[set[str]] = []


def module_names() -> dict[str, Path]:
    """Every module of PACKAGES by its dotted name (a package by its own, for __init__.py)."""
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def module_imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The repository's modules that this one imports anywhere in its body: at the top, in a
    function, under TYPE_CHECKING. `from package import name` imports the module package.name
    where there is one, else the package; the packages a module sits in, which Python runs
    first, do not count."""

    def resolve(dotted: str) -> str | None:
        while dotted and dotted not in known:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: the package, one level up per extra dot
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            targets = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names
            ]
        else:
            continue
        found |= {target for t in targets if (target := resolve(t)) and target != name}
    return found


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """The groups of modules of which each reaches every other one (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group: set[str] = set()
            while node not in group:
                group.add(stack.pop())
            groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def module_circles() -> list[set[str]]:
    known = module_names()
    graph = {name: module_imports(name, path, known) for name, path in known.items()}
    return [group for group in strongly_connected(graph) if len(group) > 1]


def test_the_module_graph_counts_imports_at_every_depth():
    known = module_names()

    def arrows(name: str) -> set[str]:
        return module_imports(name, known[name], known)

    assert {"platter_cli.jobs", "platter_cli.common"} <= arrows("platter_cli.main")
    assert "apps.lab.homes" in arrows("apps.lab.segments")  # a relative import
    assert "bench.raw_path" in arrows("bench.harness")  # inside a function
    assert "bench.harness" in arrows("portal.tests.test_bench_smoke")  # tests count too
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert sorted(map(sorted, strongly_connected(graph))) == [["a", "b", "c"], ["d"], ["e"]]


def test_no_module_of_the_repository_imports_itself_back():
    """In apps, workers, portal, platter_cli and bench, tests included, deferred imports
    included: a circle fails this test, naming its modules, unless ALLOWED_CIRCLES holds it
    whole."""
    found = module_circles()
    new = [sorted(group) for group in found if not any(group <= ok for ok in ALLOWED_CIRCLES)]
    assert new == []
    gone = [sorted(ok) for ok in ALLOWED_CIRCLES if not any(group & ok for group in found)]
    assert gone == [], "these circles are gone: take them off ALLOWED_CIRCLES"
