"""What `./platter run|test|lab|doctor|faults` does once the machine and the venv are ready.

Everything this starts (Postgres, Redis, the lab, web, workers, beat) it stops again on exit,
and only that: a server or lab that was already running is reused and left alone.
"""

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from apps.lab import devservers, place
from portal.queues import DEV_WORKERS, worker_command

BASE_DIR = Path(__file__).resolve().parent.parent.parent
PYTHON = sys.executable
WEB_ADDRESS = os.environ.get("PLATTER_WEB", "127.0.0.1:8000")


def step(message: str) -> None:
    print(f"==> {message}", flush=True)


def manage(*args: str, settings: str = "portal.settings.dev", check: bool = True) -> int:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": settings}
    child = subprocess.Popen([PYTHON, str(BASE_DIR / "manage.py"), *args], env=env)
    try:
        code = child.wait()
    except KeyboardInterrupt:
        # Ctrl-C reached the child too (or reaches it now, for a SIGTERM to us): let it finish
        # what it does on an interrupt (`lab up` takes back what it started) before going on.
        child.send_signal(signal.SIGINT)
        while child.poll() is None:
            with contextlib.suppress(KeyboardInterrupt):
                child.wait()
        raise
    if check and code != 0:
        raise SystemExit(f"manage.py {' '.join(args)} failed (exit {code})")
    return code


def lab_is_up() -> bool:
    out = subprocess.run(
        [PYTHON, str(BASE_DIR / "manage.py"), "lab", "status"], capture_output=True, text=True
    )
    rows = [line for line in out.stdout.splitlines() if "dockerd" in line]
    return out.returncode == 0 and bool(rows) and all("dockerd up," in row for row in rows)


class Stack:
    """Starts shared pieces and remembers which ones to stop."""

    def __init__(self) -> None:
        self.cleanups: list[Callable[[], object]] = []

    def services(self) -> None:
        step("PostgreSQL and Redis")
        started = devservers.up()
        for name in started:
            print(f"    started {name}")
        if started:
            self.cleanups.append(lambda: devservers.down(started))

    def stage_images(self) -> subprocess.Popen[bytes]:
        """Starts `lab stage` in the background, niced, its output in a log: fetching and
        packing the product images' sources (about 3 min alone on a fresh clone) beside ruff,
        mypy and the fast tier. Measured once from a clean clone, the overlap won nothing:
        the packing is disk and CPU as much as network, and both got slower; to be timed
        against a run without it. Wait with `staged_images` before `lab()`, which then finds
        them staged."""
        STAGE_LOG.parent.mkdir(parents=True, exist_ok=True)
        with STAGE_LOG.open("wb") as log:
            child = subprocess.Popen(
                ["nice", "-n", "10", PYTHON, str(BASE_DIR / "manage.py"), "lab", "stage"],
                env={**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings.dev"},
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C reaches it once, from close()
            )
        self.cleanups.append(lambda: stop_staging(child))
        return child

    def lab(self, product_images: bool = True) -> None:
        """The lab up (reused when it runs); without `product_images`, only what the demo
        needs: `./platter run` prepares the products behind the portal (`lab images`)."""
        manage("migrate", "--no-input", "-v", "0")
        up = ["lab", "up"] + ([] if product_images else ["--without-product-images"])
        if lab_is_up():
            step("lab already up: reusing it")
            manage(*up)  # re-registers the nodes in case the database is new
            return
        step("bringing up the lab of nodes")
        # Registered first: whatever an interrupted or failed `up` leaves, `down` removes.
        self.cleanups.append(lambda: manage("lab", "down", check=False))
        manage(*up)

    def close(self) -> None:
        while self.cleanups:
            self.cleanups.pop()()


STAGE_LOG = devservers.STATE_DIR / "lab-stage.log"


def stop_staging(child: subprocess.Popen[bytes]) -> None:
    """An unfinished staging is interrupted; it leaves only partial files it ignores later."""
    if child.poll() is None:
        os.killpg(child.pid, signal.SIGINT)  # its group: mmdebstrap and downloads too
        try:
            child.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()


def staged_images(child: subprocess.Popen[bytes]) -> None:
    """Waits for the background staging and shows what it said. A failed staging is not the
    end: `lab up` stages again and names each product it could not build."""
    step("product images' sources (staged in the background during the fast tier)")
    child.wait()
    print(STAGE_LOG.read_text(errors="replace").rstrip() or "    (nothing said)", flush=True)
    if child.returncode != 0:
        print(f"    staging exited with {child.returncode}; lab up tries again", flush=True)


def run(stack: Stack) -> int:
    """The portal answers first (the lab with what the demo needs, demo data, web, workers,
    beat), then the product images are prepared behind it (`manage.py lab images`): the
    catalog shows each version's image being prepared, and a launch of one queues until its
    image is on the nodes."""
    stack.services()
    stack.lab(product_images=False)
    step("demo data")
    manage("seed_demo")
    manage("collectstatic", "--no-input", "-v", "0")
    step(f"web (gunicorn), workers ({', '.join(DEV_WORKERS)}) and beat")
    devservers.STATE_DIR.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings.dev"}
    celery = [PYTHON, "-m", "celery", "-A", "portal"]
    schedule = str(devservers.STATE_DIR / "celerybeat-schedule")
    # Each in a process group of its own, so Ctrl-C reaches only this process, which stops
    # them in order: the web server (no new requests), beat (no new periodic tasks), then the
    # workers, which finish the tasks they hold.
    images: subprocess.Popen[bytes] | None = None
    children = {"web": devservers.start_web(WEB_ADDRESS, env)}
    for name, command in worker_commands().items():
        children[name] = subprocess.Popen(command, cwd=BASE_DIR, env=env, start_new_session=True)
    children["beat"] = subprocess.Popen(
        [*celery, "beat", "-l", "info", "-s", schedule],
        cwd=BASE_DIR,
        env=env,
        start_new_session=True,
    )
    try:
        devservers.wait_for_web(WEB_ADDRESS, children["web"])
        # Its own process group too; its end (done, or failed with the reasons in the
        # catalog) is no reason to stop the portal.
        # Through ./platter: it installs the images' own tools first (Maven, mmdebstrap, the
        # registry), which the portal did not wait for.
        images = subprocess.Popen(
            [str(BASE_DIR / "platter"), "lab", "images"],
            cwd=BASE_DIR,
            env=env,
            start_new_session=True,
        )
        print(
            "\n"
            f"  Platter is running at  http://{WEB_ADDRESS}/\n"
            f"  Admin site:            http://{WEB_ADDRESS}/admin/\n"
            "  Logins:                admin / admin-platter   (administrator)\n"
            "                         demo  / demo-platter    (a user with a quota)\n"
            "  Product images:        prepared behind the portal (the catalog shows how far;\n"
            "                         a launch of a version not ready yet queues until it is)\n"
            "  Press Ctrl-C to stop everything started here.\n",
            flush=True,
        )
        while all(child.poll() is None for child in children.values()):
            time.sleep(0.5)
        exited = [name for name, child in children.items() if child.poll() is not None]
        print(f"{', '.join(exited)} exited; stopping the rest", file=sys.stderr)
        return 1
    except devservers.ServerError as exc:
        print(exc, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nstopping…", flush=True)
        return 0
    finally:
        with interrupts_ignored():
            if images is not None:  # first: it builds on the nodes the lab keeps
                stop_staging(images)
            for name in ("web", "beat"):
                devservers.stop_process(children.pop(name))
            # The workers all at once: each finishes the tasks it holds (up to 30 s).
            with ThreadPoolExecutor(max_workers=len(children)) as pool:
                list(pool.map(devservers.stop_process, children.values()))


def worker_commands() -> dict[str, list[str]]:
    """The Celery workers of `./platter run`, one per kind of work as in production
    (portal/queues.py DEV_WORKERS): a user's jobs never hold a launch's or beat's slot."""
    return {
        f"worker-{name}": worker_command(f"platter-{name}", *options, queues=queues)
        for name, (queues, options) in DEV_WORKERS.items()
    }


@contextlib.contextmanager
def interrupts_ignored() -> Iterator[None]:
    """A second Ctrl-C must not cut the stop in half (that is what leaves things running)."""
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


# The fast tier: every test that needs neither the lab, nor a Celery worker, nor Chromium (the
# markers conftest.py sets from the fixtures a test uses). It runs on several pytest-xdist
# processes, one per core and one more each for the time tests spend waiting on PostgreSQL,
# servers they start and sleeps. The other tiers run in one process: their tests share the
# lab's nodes, and each runs a Celery worker of its own.
TIERS = ("lab", "worker", "browser")
FAST_TIER = " and ".join(f"not {marker}" for marker in TIERS)
SLOW_TIERS = " or ".join(TIERS)


def fast_processes() -> str:
    """pytest-xdist's process count for the fast tier (PLATTER_TEST_PROCESSES overrides it);
    "0" (one process) on a Redis without databases for several (a shared or older one)."""
    wanted = os.environ.get("PLATTER_TEST_PROCESSES", str(min(4, 2 * (os.cpu_count() or 1))))
    if int(wanted) > 1 and devservers.redis_databases() < devservers.TEST_REDIS_DATABASES:
        print(
            f"    Redis has fewer than {devservers.TEST_REDIS_DATABASES} databases: the fast"
            " tier runs in one process (restart Redis with `--databases 64` for several)"
        )
        return "0"
    return wanted


def test(stack: Stack, pytest_args: list[str]) -> int:
    """The whole check: the fast tier first (it fails in minutes when something basic broke),
    then the lab, worker and browser tiers on the lab. With --fast, no lab is started and only
    the fast tier runs; with other arguments (a path, -k, ...), one pytest run takes them."""
    fast = "--fast" in pytest_args
    pytest_args = [arg for arg in pytest_args if arg != "--fast"]
    whole = not fast and not pytest_args
    staging = stack.stage_images() if whole and not lab_is_up() else None
    step("ruff")
    for command in (["check", "."], ["format", "--check", "."]):
        if subprocess.run([PYTHON, "-m", "ruff", *command], cwd=BASE_DIR).returncode != 0:
            return 1
    step("mypy")  # apps/, workers/, portal/ and bench/, as pyproject.toml's [tool.mypy] says
    if subprocess.run([PYTHON, "-m", "mypy"], cwd=BASE_DIR).returncode != 0:
        print("type errors: see above (mypy's configuration is in pyproject.toml)", file=sys.stderr)
        return 1
    stack.services()
    step("migrations are complete")
    if manage("makemigrations", "--check", "--dry-run", check=False) != 0:
        print("model changes without a migration: run manage.py makemigrations", file=sys.stderr)
        return 1
    if fast or not pytest_args:
        processes = fast_processes()
        step(f"pytest, fast tier (no lab, worker or browser) on {max(int(processes), 1)} processes")
        # A module's tests stay in one process (--dist loadfile): some share a server-wide
        # resource of their module's own (a bench's database, a spawned web server).
        code = pytest(
            ["-m", FAST_TIER, "-n", processes, "--dist", "loadfile", *pytest_args],
            budget="fast" if fast else "full",
        )
        if fast or code != 0:
            return code
    if staging is not None:
        staged_images(staging)
    stack.lab()
    if pytest_args:
        step("pytest")
        return pytest(pytest_args)
    step("pytest, lab, worker and browser tiers")
    return pytest(["-m", SLOW_TIERS, "--durations=25"])


def pytest(args: list[str], budget: str = "full") -> int:
    code = subprocess.run(
        [PYTHON, "-m", "pytest", *args], cwd=BASE_DIR, env=pytest_environment(budget)
    ).returncode
    if code == 5:
        print("pytest collected no tests: that is a failure here", file=sys.stderr)
        return 1
    return code


def pytest_environment(budget: str) -> dict[str, str]:
    """pytest's environment. `budget` is "fast" for `--fast` alone: its property-based tests
    run fewer examples (portal.testing.examples); the whole check keeps the full budget.

    Compiled modules are kept under .local/pycache even where PYTHONDONTWRITEBYTECODE is set:
    without them each xdist process, and each Django command a test starts, compiles every
    module again, test modules with pytest's assertion rewriting included (issue 28: about 6 s
    of CPU per process)."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings.test",
        "PLATTER_TEST_BUDGET": budget,
        "PYTHONPYCACHEPREFIX": str(BASE_DIR / ".local" / "pycache"),
    }
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def faults(args: list[str]) -> int:
    """./platter faults [--json]: the fault suite (apps/lab/faults.py) on a portal of its own
    under .local/faults (its PostgreSQL, Redis and two-node lab), all stopped afterwards."""
    from apps.lab.scratch import scratch_environment

    slot = int(os.environ.get("PLATTER_FAULTS_SLOT", "0"))
    state = devservers.STATE_DIR / "faults"
    cli = [PYTHON, "-m", "apps.lab.cli"]
    if state.exists():  # what an interrupted run left: taken down, then started afresh
        env = scratch_environment(state, slot)
        subprocess.run([*cli, "lab", "down"], cwd=BASE_DIR, env=env)
        subprocess.run([PYTHON, "-m", "apps.lab.devservers", "down"], cwd=BASE_DIR, env=env)
        shutil.rmtree(state)
    env = scratch_environment(state, slot)
    try:
        step("a portal of its own for the fault suite: its lab")
        subprocess.run([*cli, "lab", "up"], cwd=BASE_DIR, env=env, check=True)
        step("the faults")
        suite = [PYTHON, str(BASE_DIR / "manage.py"), "fault_suite", *args]
        return subprocess.run(suite, cwd=BASE_DIR, env=env).returncode
    except subprocess.CalledProcessError as error:
        print(f"the fault suite's lab did not come up (exit {error.returncode})", file=sys.stderr)
        return 1
    finally:
        with interrupts_ignored():
            subprocess.run([*cli, "lab", "down"], cwd=BASE_DIR, env=env)
            subprocess.run([PYTHON, "-m", "apps.lab.devservers", "down"], cwd=BASE_DIR, env=env)


def main(argv: list[str]) -> int:
    os.chdir(BASE_DIR)
    command, rest = (argv[0], argv[1:]) if argv else ("", [])
    if command == "doctor":
        return manage("doctor", *rest, check=False)
    # Stop on SIGTERM the same way as on Ctrl-C, so CI or a supervisor cleans up too; SIGINT is
    # set explicitly because a shell starting us in the background would have it ignored.
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    if command == "faults":
        return faults(rest)
    if command in ("run", "test", "lab"):
        # Before any settings load: where this checkout's lab sits, chosen once (place.py).
        place.ensure(devservers.STATE_DIR)
    if command == "lab":
        # The lab's inventory rows live in the database. After `lab up` it stays up with the
        # lab; any other lab command stops the servers it started (so `lab down` leaves none).
        started, code = devservers.up(), 1
        try:
            manage("migrate", "--no-input", "-v", "0")
            code = manage("lab", *rest, check=False)
        except KeyboardInterrupt:
            code = 130
        finally:
            if rest[:1] != ["up"] or code != 0:
                with interrupts_ignored():
                    devservers.down(started)
        return code
    stack = Stack()
    try:
        if command == "run":
            return run(stack)
        if command == "test":
            return test(stack, rest)
        print("usage: ./platter run | test | lab up|down|status | doctor", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    finally:
        with interrupts_ignored():
            stack.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
