"""Renders a CESGA product template (json+jinja2) in Jinja2's sandbox, in a child process.

Run by apps.catalog.cesga_import as ``python -I cesga_render.py`` with a JSON request on
stdin: ``{"template": "...", "contexts": [{"opts": {...}, "clusterid": "..."}, ...]}``; it
writes ``{"results": [{"output": "..."} or {"error": "..."}, ...]}``, one per context. It
imports nothing from Platter (no settings, no database), only the standard library and Jinja2.

Why a child process: the sandbox stops a template from reaching Python's internals, but not
from doing a lot of work (``{% set a = s ~ s %}`` doubled forty times, nested loops). The
loops it offers are refused early by a counted ``range``; everything else is bounded by the
process's own CPU and memory limits, which no template can lift.
"""

import json
import resource
import sys

from jinja2 import StrictUndefined, TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

MAX_RANGE = 10_000  # items of one range(): far more nodes or disks than a pool has
MAX_ITEMS = 100_000  # items of every range() of one render together (nested loops)
MAX_OUTPUT = 256 * 1024  # characters of one rendered template
CPU_SECONDS = 5
MEMORY_BYTES = 512 * 1024 * 1024


class TemplateTooBig(Exception):
    pass


class Sandbox(ImmutableSandboxedEnvironment):
    """Immutable: no list.append or dict.update, so a loop cannot grow a value in place."""

    def __init__(self) -> None:
        super().__init__(undefined=StrictUndefined, autoescape=False)
        self.items = 0
        # Only what CESGA templates use (range, joiner) and a few harmless helpers;
        # lipsum(n) and namespace (a value a loop can grow) are left out.
        self.globals = {
            "range": self.counted_range,
            "joiner": self.globals["joiner"],
            "dict": dict,
            "cycler": self.globals["cycler"],
        }

    def counted_range(self, *args: int) -> range:
        numbers = range(*args)
        if len(numbers) > MAX_RANGE:
            raise TemplateTooBig(
                f"range({', '.join(map(str, args))}) has {len(numbers)} items; "
                f"a template may loop at most {MAX_RANGE} times"
            )
        self.items += len(numbers)
        if self.items > MAX_ITEMS:
            raise TemplateTooBig(f"the template's loops run more than {MAX_ITEMS} times in all")
        return numbers


def render(source: str, context: dict) -> str:
    sandbox = Sandbox()
    chunks: list[str] = []
    size = 0
    for chunk in sandbox.from_string(source).generate(context):
        size += len(chunk)
        if size > MAX_OUTPUT:
            raise TemplateTooBig(f"the rendered template is longer than {MAX_OUTPUT} characters")
        chunks.append(chunk)
    return "".join(chunks)


def render_one(source: str, context: dict) -> dict:
    try:
        return {"output": render(source, context)}
    except TemplateTooBig as exc:
        return {"error": str(exc)}
    except SecurityError as exc:
        return {"error": f"the sandbox refused: {exc}"}
    except TemplateError as exc:
        line = getattr(exc, "lineno", None)
        where = f" (line {line})" if line else ""
        return {"error": f"{type(exc).__name__}{where}: {exc}"}
    except MemoryError:
        return {"error": f"the template needs more than {MEMORY_BYTES >> 20} MB to render"}
    except (ArithmeticError, TypeError, ValueError, LookupError, RecursionError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}


def main() -> None:
    request = json.load(sys.stdin)
    # After the imports and the request: the limits bound only the template's own work.
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS + 1))
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    results = [render_one(request["template"], context) for context in request["contexts"]]
    json.dump({"results": results}, sys.stdout)


if __name__ == "__main__":
    main()
