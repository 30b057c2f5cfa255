"""The benches are scripts (bench/ is no package); their tests load them by file name."""

import importlib.util
from types import ModuleType

from django.conf import settings


def load_bench(name: str) -> ModuleType:
    """bench/<name>.py as a module, run once per call."""
    spec = importlib.util.spec_from_file_location(
        f"bench_{name}", settings.BASE_DIR / f"bench/{name}.py"
    )
    assert spec is not None and spec.loader is not None, f"bench/ has the script {name}.py"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
