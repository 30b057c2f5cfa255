"""No shell command is ever built from user input.

Every Python source of the project is read (ast): nothing may start a shell on this machine
(shell=True, os.system, os.popen, ...; ruff's S602/S605 say the same while editing), and every
`sh -c` script sent to a container that is not a fixed string must be one of the audited spots
below, each of which puts only values of our own making into the script. User text reaches
containers only through the catalog's placeholders, whose values apps.catalog.options checks
(tests in apps/catalog/tests/test_user_text.py).
"""

import ast
import os
from pathlib import Path

from django.conf import settings

BASE_DIR = Path(settings.BASE_DIR)
SKIP_PARTS = {".venv", ".local", "node_modules", "staticfiles", "artifacts", ".git"}
SHELL_CALLS = {
    ("os", "system"),
    ("os", "popen"),
    ("subprocess", "getoutput"),
    ("subprocess", "getstatusoutput"),
    ("asyncio", "create_subprocess_shell"),
}
SHELL_METHODS = {"create_subprocess_shell", "subprocess_shell"}  # also on event loops

# (file, function) -> why its runtime-built `sh -c` script holds nothing a user chose.
AUDITED_SCRIPTS = {
    # The output file name is ours (a random hex id); the user-facing argv follows as "$@",
    # separate arguments the shell never parses.
    ("apps/nodes/client.py", "exec"): "uuid file name, argv passed as $@",
    # The folder name is cluster-<database id>.
    ("workers/lifecycle.py", "wipe_node"): "cluster id from the database",
    # The folder kept is the cluster's own, cluster-<database id>.
    ("workers/node_steps.py", "prepare_node"): "cluster id from the database",
    # A file of the job's own folder (named by the job's id), quoted; offset and limit are ints.
    ("apps/nodes/client.py", "read_file"): "our own path, shlex-quoted; numbers",
    # Jobs: the user's program and its arguments go after the script as "$@" (never parsed by
    # the shell); the folder (by job id), the application id and the output path are
    # shlex-quoted; the process group is a number read back from our own file.
    ("apps/jobs/commands.py", "launcher"): "user argv as $@, our folder quoted",
    ("apps/jobs/commands.py", "kill"): "application id quoted, our folder, a number",
    ("apps/jobs/commands.py", "outputs"): "the output path shlex-quoted as one argument",
    # Resize: addresses and hostnames from the database (ours), shlex-quoted or shlex.join-ed.
    ("workers/resize.py", "_add_hosts"): "database addresses and hostnames, quoted",
    # The bench's Hadoop commands: its own constants and numbers, run in its own cluster.
    ("bench/terasort.py", "hadoop"): "the bench's constants",
    ("bench/terasort.py", "hadoop_output"): "the bench's constants",
}


def python_sources() -> list[Path]:
    """Every .py file of the project. Skipped folders are never entered: a running lab's
    data-roots under .local change while they would be read."""
    found = []
    for folder, subfolders, files in os.walk(BASE_DIR):
        subfolders[:] = [name for name in subfolders if name not in SKIP_PARTS]
        found += [Path(folder) / name for name in files if name.endswith(".py")]
    return sorted(found)


def is_test(path: Path) -> bool:
    parts = path.relative_to(BASE_DIR).parts
    return "tests" in parts or path.name in ("conftest.py",)


def shell_uses(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        for keyword in node.keywords:
            literal_false = isinstance(keyword.value, ast.Constant) and not keyword.value.value
            if keyword.arg == "shell" and not literal_false:
                found.append((node.lineno, "shell=True"))
        func = node.func
        if isinstance(func, ast.Attribute):
            owner = func.value.id if isinstance(func.value, ast.Name) else ""
            if (owner, func.attr) in SHELL_CALLS or func.attr in SHELL_METHODS:
                found.append((node.lineno, f"{owner}.{func.attr}"))
        elif isinstance(func, ast.Name) and func.id in {name for _, name in SHELL_CALLS}:
            found.append((node.lineno, func.id))  # from os import system
    return found


def built_scripts(tree: ast.AST) -> list[tuple[str, int]]:
    """(innermost function, line) of every ["sh" | "bash", "-c", <not a constant>, ...]."""
    found = []

    def visit(node: ast.AST, function: str) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            function = node.name
        if isinstance(node, ast.List) and is_built_script(node):
            found.append((function, node.lineno))
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(tree, "<module>")
    return found


def is_built_script(node: ast.List) -> bool:
    if len(node.elts) < 3:
        return False
    shell, flag, script = node.elts[:3]
    if not (isinstance(shell, ast.Constant) and isinstance(flag, ast.Constant)):
        return False
    if str(shell.value).rsplit("/", 1)[-1] not in ("sh", "bash") or flag.value != "-c":
        return False
    # A fixed script is a literal, or a module-level CONSTANT such as discovery's PROBE.
    fixed = isinstance(script, ast.Constant) or (
        isinstance(script, ast.Name) and script.id.isupper()
    )
    return not fixed


def test_no_python_source_starts_a_shell():
    sources = python_sources()
    assert len(sources) > 100  # the scan really covers the project
    offenders = [
        f"{path.relative_to(BASE_DIR)}:{line}: {what}"
        for path in sources
        for line, what in shell_uses(ast.parse(path.read_text(), str(path)))
    ]
    assert offenders == []


def test_the_scan_finds_what_it_looks_for():
    tree = ast.parse(
        "import os, subprocess\n"
        "subprocess.run(cmd, shell=True)\nos.system('ls')\nos.popen(x)\n"
        "subprocess.run(['ls'], shell=False)\n"
        "def f(name):\n    return ['sh', '-c', f'rm {name}']\n"
    )
    assert shell_uses(tree) == [(2, "shell=True"), (3, "os.system"), (4, "os.popen")]
    assert built_scripts(tree) == [("f", 7)]


def test_every_script_built_at_runtime_is_an_audited_one():
    found = {
        (str(path.relative_to(BASE_DIR)), function)
        for path in python_sources()
        if not is_test(path)
        for function, _line in built_scripts(ast.parse(path.read_text(), str(path)))
    }
    assert found == set(AUDITED_SCRIPTS)
