"""NodeClient: what Platter asks of one node, in plain values and typed errors.

Output of a command run in a container goes to a file in the container's /tmp: reading it back
is a plain HTTP request, while attaching to an exec needs a hijacked connection that docker's
ssh:// transport breaks (BrokenPipeError).
"""

import codecs
import io
import logging
import shlex
import tarfile
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any, BinaryIO, TypeVar

import docker
from django.conf import settings
from docker.errors import DockerException
from docker.types import LogConfig
from docker.utils import decode_json_header

from portal import streams

from . import engine, logstream
from .engine import Endpoint
from .errors import NodeConflict, NodeError, NodeMissing, NodeRefused, NodeUnreachable, NotAFile
from .specs import LOG_DRIVER, LOG_OPTIONS, ContainerSpec

log = logging.getLogger(__name__)
T = TypeVar("T")
EXEC_OUTPUT = "/tmp/.platter-exec-{}"  # noqa: S108 (inside the container, one file per run)
# An exec's output is read back whole into the worker's memory: the container keeps only its
# last EXEC_OUTPUT_LIMIT bytes, after a line saying it was cut (what callers show is its end).
EXEC_OUTPUT_LIMIT = 64 * 1024
EXEC_CUT = "[output cut to its last {} bytes]"
CHUNK = 64 * 1024  # what a file download holds of a file at once
PATH_STAT = "X-Docker-Container-Path-Stat"
_EXEC_SCRIPT = (
    '"$@" >{file} 2>&1; code=$?; '
    'if [ "$(wc -c <{file})" -gt {limit} ]; then '
    '{{ echo "{cut}"; tail -c {limit} {file}; }} >{file}.cut && mv {file}.cut {file}; fi; '
    "exit $code"
)


@dataclass(frozen=True)
class FileRead:
    """A file being read from a container: its whole size, and its first bytes as chunks
    (the response stays open until they are read to their end or closed)."""

    size: int
    chunks: Iterator[bytes]


class NodeClient:
    """One node's Docker Engine, reached through its endpoint; every method raises NodeError
    (or a subclass) naming the node and what was being done."""

    def __init__(self, node: Endpoint) -> None:
        self.node = node
        self.name = node.name

    # -------------------------------------------------------------- plumbing

    @property
    def _api(self) -> docker.APIClient:
        try:
            return engine.cached(self.node).api
        except DockerException as error:  # the ssh transport fails while connecting
            raise engine.classify(self.name, error, "connect") from error

    def _call(self, action: Callable[[docker.APIClient], T], what: str) -> T:
        return engine.call(self.node, lambda: action(self._api), what)

    def forget(self) -> None:
        """Drop the cached connection, e.g. after the node's daemon restarted."""
        engine.forget(self.node)

    def ping(self) -> None:
        self._call(lambda api: api.ping(), "ping")

    # -------------------------------------------------------------- containers

    def inspect(self, name: str) -> dict | None:
        """The Engine's record of a container, or None when the node has none by that name."""
        try:
            return self._call(lambda api: api.inspect_container(name), f"inspect {name}")
        except NodeMissing:
            return None

    def container_state(self, name: str) -> str | None:
        """The container's state as Docker names it ("running", "exited", ...), or None."""
        info = self.inspect(name)
        return info["State"]["Status"] if info else None

    def containers(self, labels: dict[str, str]) -> list[dict]:
        """Every container (running or not) carrying all these labels, as the Engine lists
        them (Id, Names, Labels, State, Status, Created)."""
        wanted = [f"{k}={v}" for k, v in labels.items()]
        return self._call(
            lambda api: api.containers(all=True, filters={"label": wanted}), "list containers"
        )

    def ensure_running(self, spec: ContainerSpec) -> tuple[str, float]:
        """The container exists as specified and runs; returns (id, seconds taken). One with
        the same fingerprint is reused (a retried task); one made from an older spec is
        replaced. A launch's containers do not exist yet: creating comes first, and only a
        name already taken costs a look at what holds it (two Engine calls, as a plain
        `docker run`, instead of three)."""
        started = time.monotonic()
        try:
            container_id = self._create(spec)
        except NodeConflict:  # an earlier try, or an older spec, holds the name
            info = self.inspect(spec.name)
            if info and info["Config"]["Labels"].get("platter.fingerprint") != spec.fingerprint():
                self.remove(spec.name)
                info = None
            if info is None:
                container_id = self._create(spec, found_ok=True)
            else:
                container_id = info["Id"]
                if info["State"]["Running"]:
                    return container_id, time.monotonic() - started
        self._call(lambda api: api.start(container_id), f"start {spec.hostname}")
        return container_id, time.monotonic() - started

    def _create(self, spec: ContainerSpec, found_ok: bool = False) -> str:
        """Create the container and return its id; when its name is taken, raises
        NodeConflict, or with `found_ok` returns the id of the container holding it (an
        earlier try of this very create made it; NodeMissing if it went again since)."""
        try:
            created = self._call(
                lambda api: api.create_container(**self._create_arguments(api, spec)),
                f"create {spec.hostname}",
            )
        except NodeConflict:
            if not found_ok:
                raise
            created = self._call(
                lambda api: api.inspect_container(spec.name), f"inspect {spec.name}"
            )
        return created["Id"]

    @staticmethod
    def _create_arguments(api: docker.APIClient, spec: ContainerSpec) -> dict:
        network = spec.network
        limits: dict = {}
        if settings.CONTAINER_ROOTFS_LIMIT:  # needs overlay2 on xfs with project quotas
            limits["storage_opt"] = {"size": settings.CONTAINER_ROOTFS_LIMIT}
        host_config = api.create_host_config(
            binds=spec.binds,
            nano_cpus=spec.cores * 1_000_000_000,
            mem_limit=f"{spec.memory_mb}m",
            memswap_limit=f"{spec.memory_mb}m",  # no swap beyond the reserved memory
            pids_limit=settings.CONTAINER_PIDS_LIMIT,
            cap_drop=["ALL"],
            cap_add=spec.capabilities,
            security_opt=["no-new-privileges"],
            privileged=False,
            network_mode=network,
            extra_hosts=spec.extra_hosts,
            log_config=LogConfig(type=LOG_DRIVER, config=LOG_OPTIONS),
            # A crashed product process comes back with its disks, as under any supervisor.
            restart_policy={
                "Name": "on-failure",
                "MaximumRetryCount": settings.CONTAINER_RESTARTS,
            },
            **limits,
            **spec.throttles,
        )
        networking = api.create_networking_config(
            # types-docker: the SDK takes {network name: EndpointConfig}, the stub one config
            {network: api.create_endpoint_config(ipv4_address=spec.address)}  # type: ignore[arg-type]
        )
        return {
            "image": spec.image,
            "command": spec.command,
            "name": spec.name,
            "hostname": spec.hostname,
            "labels": {**spec.labels, "platter.fingerprint": spec.fingerprint()},
            "environment": spec.environment,
            "user": spec.user or None,
            "host_config": host_config,
            "networking_config": networking,
            "detach": True,
        }

    def start(self, name: str) -> None:
        self._call(lambda api: api.start(name), f"start {name}")

    def stop(self, name: str, timeout: int | None = None) -> None:
        """Stop a container; one the node does not have counts as stopped."""
        seconds = settings.CONTAINER_STOP_TIMEOUT if timeout is None else timeout
        with suppress(NodeMissing):
            self._call(lambda api: api.stop(name, timeout=seconds), f"stop {name}")

    def remove(self, name: str) -> None:
        """Remove a container, running or not; one the node does not have counts as removed."""
        with suppress(NodeMissing):
            self._call(lambda api: api.remove_container(name, force=True), f"remove {name}")

    def kill(self, name: str, signal: str = "KILL") -> None:
        self._call(lambda api: api.kill(name, signal=signal), f"kill {name}")

    def update_limits(self, name: str, cores: int, memory_mb: int | None = None) -> None:
        """Set a running container's CPU limit (and its memory, when given) without a restart.
        The SDK's update_container has no NanoCpus, and a container made with NanoCpus refuses
        a CpuQuota, so the Engine's own update call is made with the same field as create."""
        data: dict = {"NanoCpus": cores * 1_000_000_000}
        if memory_mb is not None:  # no swap beyond the memory, as at create
            data["Memory"] = data["MemorySwap"] = memory_mb * 1024 * 1024

        def update(api: docker.APIClient) -> None:
            engine: Any = api  # the SDK's own helpers for a call it does not wrap
            engine._raise_for_status(
                engine._post_json(engine._url("/containers/{0}/update", name), data)
            )

        self._call(update, f"update the limits of {name}")

    # -------------------------------------------------------------- commands and logs

    def exec(self, container: str, argv: list[str], timeout: float) -> tuple[int, str]:
        """Run argv in a running container (which needs a POSIX sh); returns the exit code and
        the output (at most its last EXEC_OUTPUT_LIMIT bytes, saying so when it was cut), or
        raises TimeoutError when it runs longer than `timeout` seconds."""
        output_file = EXEC_OUTPUT.format(uuid.uuid4().hex[:12])
        limit = EXEC_OUTPUT_LIMIT
        script = _EXEC_SCRIPT.format(file=output_file, limit=limit, cut=EXEC_CUT.format(limit))
        wrapped = ["sh", "-c", script, "platter-exec", *argv]
        what = f"exec in {container}"
        # An exec starts only once: when the start fails (runc refuses execs into a container
        # whose process is just starting), a new exec is made rather than the same one
        # retried (which answers "already run").
        created = self._call(lambda api: api.exec_create(container, wrapped), what)
        for attempt in range(1, settings.NODE_API_RETRIES + 1):
            try:
                self._api.exec_start(created["Id"], detach=True)
                break
            except Exception as error:
                if attempt == settings.NODE_API_RETRIES:
                    raise engine.classify(self.name, error, what) from error
                log.warning("node %s: %s failed (%s); a new exec", self.name, what, error)
                time.sleep(0.2 * attempt)
                created = self._call(lambda api: api.exec_create(container, wrapped), what)
        deadline = time.monotonic() + timeout
        pause = 0.02
        while True:
            state = self._call(lambda api: api.exec_inspect(created["Id"]), what)
            if not state["Running"]:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"{argv[0]} ran longer than {timeout:.0f} s in {container}")
            time.sleep(pause)
            pause = min(pause * 2, 0.5)
        stream, stat = self._call(
            lambda api: api.get_archive(container, output_file), "read exec output"
        )
        # Bounded here too, for a container whose sh could not cut it (no wc or tail).
        size = int(stat.get("size", 0))
        if size > limit + 256:
            with suppress(Exception):
                stream.close()  # a generator over the response
            return state["ExitCode"], f"[output of {size} bytes not read: over {limit} bytes]"
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as archive:
            member = archive.extractfile(archive.getmembers()[0])
            output = member.read().decode(errors="replace") if member else ""
        return state["ExitCode"], output

    # -------------------------------------------------------------- files and long commands
    # Jobs (workers/jobs.py): files copied in, a command left running, its output read back
    # in parts. All plain HTTP requests, so they work over every transport.

    def put_files(self, container: str, folder: str, files: dict[str, bytes]) -> None:
        """Write `files` (name -> content) into `folder` of the container, making the folder."""
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as archive:
            parts = folder.strip("/").split("/")
            for depth in range(1, len(parts) + 1):
                entry = tarfile.TarInfo("/".join(parts[:depth]))
                entry.type, entry.mode, entry.mtime = tarfile.DIRTYPE, 0o755, int(time.time())
                archive.addfile(entry)
            for name, content in files.items():
                entry = tarfile.TarInfo(f"{'/'.join(parts)}/{name}")
                entry.size, entry.mode, entry.mtime = len(content), 0o644, int(time.time())
                archive.addfile(entry, io.BytesIO(content))
        data = buffer.getvalue()
        self._call(lambda api: api.put_archive(container, "/", data), f"copy files to {container}")

    def start_exec(
        self, container: str, argv: list[str], environment: dict[str, str] | None = None
    ) -> str:
        """Start argv in the container and leave it running; returns the exec's id, for
        exec_status. Its output goes where argv sends it (nothing is attached)."""
        what = f"exec in {container}"
        created = self._call(
            lambda api: api.exec_create(container, argv, environment=environment), what
        )
        self._call(lambda api: api.exec_start(created["Id"], detach=True), what)
        return created["Id"]

    def exec_status(self, exec_id: str) -> int | None:
        """The exit code of an exec started by start_exec, or None while it runs."""
        state = self._call(lambda api: api.exec_inspect(exec_id), "inspect an exec")
        return None if state["Running"] else state["ExitCode"]

    def read_file(self, container: str, path: str, offset: int, limit: int) -> bytes:
        """At most `limit` bytes of a file in the container from byte `offset` on (b"" when
        there are none, or no file yet): a growing log, read in parts."""
        part = f"{path}.part"
        where, into = shlex.quote(path), shlex.quote(part)
        command = f"tail -c +{int(offset) + 1} {where} 2>/dev/null | head -c {int(limit)} >{into}"
        exec_id = self.start_exec(container, ["sh", "-c", command])
        deadline, pause = time.monotonic() + settings.NODE_API_TIMEOUT, 0.01
        while (code := self.exec_status(exec_id)) is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {path} took over {settings.NODE_API_TIMEOUT} s")
            time.sleep(pause)
            pause = min(pause * 2, 0.2)
        if code != 0:
            return b""
        _size, data = self.get_file(container, part, limit)
        return data or b""

    def get_file(self, container: str, path: str, limit: int) -> tuple[int, bytes | None]:
        """The size of a file in the container and its content, None when it is larger than
        `limit` bytes (not read then). NodeMissing when there is no such file."""
        stream, stat = self._call(
            lambda api: api.get_archive(container, path), f"read {path} in {container}"
        )
        size = int(stat.get("size", 0))
        if size > limit:
            with suppress(Exception):
                stream.close()  # a generator over the response
            return size, None
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as archive:
            member = archive.extractfile(archive.getmembers()[0])
            return size, member.read() if member else b""

    def stat(self, container: str, path: str) -> dict:
        """What the Engine itself finds at a path of the container (name, size, mode as Go's
        os.FileMode, linkTarget): the path's last part is not followed, the folders above it
        are (inside the container). NodeMissing when there is nothing there."""

        def head(api: docker.APIClient) -> dict:
            # The SDK has no call for the Engine's HEAD /containers/<id>/archive: its own
            # (private) helpers build the URL and raise its errors.
            url = api._url("/containers/{0}/archive", container)  # type: ignore[attr-defined]
            answer = api.head(url, params={"path": path}, timeout=api.timeout)
            api._raise_for_status(answer)  # type: ignore[attr-defined]
            return decode_json_header(answer.headers[PATH_STAT])

        return self._call(head, f"look at {path} in {container}")

    def open_file(self, container: str, path: str, limit: int) -> FileRead:
        """A regular file of the container as the Engine reads it, never as the container
        says it is: NotAFile when the path, or any folder on its way, is a symbolic link, or
        the path is a folder or anything but a regular file (NodeMissing: nothing there). Its
        chunks stream its first `limit` bytes at most, one CHUNK at a time.

        The Engine follows symbolic links in the folders above a path (inside the container)
        and would read the file a tenant's link points at: each folder is looked at first. A
        link swapped in between that look and the read is not seen; the Engine still reads
        only inside the container."""
        parts = PurePosixPath(path).parts
        if not path.startswith("/") or any(p in (".", "..") for p in path.split("/")):
            raise ValueError(f"{path!r} is not an absolute, plain path")
        for depth in range(2, len(parts)):
            folder = str(PurePosixPath(*parts[:depth]))
            kind = file_kind(self.stat(container, folder))
            if kind != "a folder":
                raise NotAFile(self.name, folder, kind)
        stream, stat = self._call(
            lambda api: api.get_archive(container, path, chunk_size=CHUNK),
            f"read {path} in {container}",
        )
        try:
            kind = file_kind(stat or {})
            if kind != "a regular file":
                raise NotAFile(self.name, path, kind)
            # The archive is read as it comes (tarfile's stream mode), never whole; it is
            # read on after this returns, so no context manager.
            archive = tarfile.open(fileobj=_Chunks(stream), mode="r|")  # noqa: SIM115
            member = archive.next()
            if member is None or not member.isreg():  # its archive must say so too
                raise NotAFile(self.name, path, "not a regular file in its archive")
            content = archive.extractfile(member)
        except BaseException as error:
            with suppress(Exception):
                stream.close()  # a generator over the response
            failure = _read_error(self.name, path, error)
            if failure is error:
                raise
            raise failure from error
        return FileRead(
            member.size, self._file_chunks(path, content, stream, min(member.size, limit))
        )

    def _file_chunks(
        self, path: str, content: IO[bytes] | None, stream: Generator[bytes], left: int
    ) -> Iterator[bytes]:
        try:
            while left > 0 and content is not None:
                chunk = content.read(min(CHUNK, left))
                if not chunk:
                    raise NodeUnreachable(self.name, f"{path} ended {left} bytes short")
                left -= len(chunk)
                yield chunk
        except Exception as error:
            failure = _read_error(self.name, path, error)
            if failure is error:
                raise
            raise failure from error
        finally:  # also when the reader left early, or at the limit: the rest is not read
            with suppress(Exception):
                stream.close()

    def logs(
        self,
        container: str,
        tail: int,
        *,
        since: float | None = None,
        timestamps: bool = False,
    ) -> str:
        """The last `tail` lines of a container's log (stdout and stderr in the order written),
        only those at or after `since` (seconds since the epoch) when given. NodeMissing when
        the node has no such container."""
        options: dict = {"tail": tail, "timestamps": timestamps}
        if since is not None:
            options["since"] = since
        raw = self._call(lambda api: api.logs(container, **options), f"read the log of {container}")
        return raw.decode(errors="replace")

    def follow_logs(
        self,
        container: str,
        tail: int,
        seconds: float,
        *,
        since: float | None = None,
        timestamps: bool = False,
    ) -> Iterator[str]:
        """The last `tail` lines (of those at or after `since`, when given), then new output
        as the container writes it, for at most `seconds`, or until the container stops.

        The daemon checks `until` only when a line comes, and the SDK reads the stream without
        a timeout, so a timer cuts the stream when time is up. The stream has a client of its
        own: cutting it leaves the node's cached client and its pooled connections alone."""
        try:
            client = engine.connect(self.node.endpoint, self.node.tls_dir)
        except DockerException as error:
            raise engine.classify(self.name, error, "connect") from error
        options: dict = {"tail": tail, "timestamps": timestamps, "until": time.time() + seconds}
        if since is not None:
            options["since"] = since
        try:
            stream = engine.call(
                self.node,
                lambda: client.api.logs(container, stream=True, follow=True, **options),
                f"follow the log of {container}",
            )
        except BaseException:
            client.close()
            raise
        timer = threading.Timer(seconds, _cut, (stream,))
        timer.daemon = True
        timer.start()
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")  # split characters
        try:
            for chunk in stream:
                if text := decoder.decode(chunk):
                    yield text
            if rest := decoder.decode(b"", final=True):
                yield rest
        finally:  # also when the reader left early
            timer.cancel()
            _cut(stream)
            client.close()

    def follow_logs_async(
        self,
        container: str,
        tail: int,
        seconds: float,
        *,
        since: float | None = None,
        timestamps: bool = False,
    ) -> AsyncIterator[str]:
        """follow_logs() on the event loop (apps.nodes.logstream): the web process's log
        follows wait there instead of each holding a thread."""
        if logstream.can_follow_async(self.node):
            return logstream.follow(
                self.node, container, tail, seconds, since=since, timestamps=timestamps
            )
        stream = self.follow_logs(container, tail, seconds, since=since, timestamps=timestamps)
        return streams.in_thread(stream)

    def run_helper(
        self,
        command: list[str],
        binds: list[str],
        capabilities: tuple[str, ...] = (),
        *,
        image: str = "",
        entrypoint: list[str] | None = None,
        host_options: dict | None = None,
        labels: dict[str, str] | None = None,
        network_mode: str = "none",
        environment: dict[str, str] | None = None,
    ) -> tuple[int, str]:
        """Run a short-lived helper container (our own small image unless `image` names
        another, no network, only the given binds) to completion; returns its exit code and
        output. Used for disk discovery, wipes and disk benchmarks (which add blkio throttles:
        host_options). `labels` name the operation it serves (apps.nodes.helpers.serving), so
        the reconciler leaves it alone while that operation runs."""
        image = image or settings.NODE_HELPER_IMAGE
        self.ensure_image(image)
        api = self._api
        host_config = api.create_host_config(
            binds=binds,
            network_mode=network_mode,
            cap_drop=["ALL"],
            cap_add=list(capabilities),
            security_opt=["no-new-privileges"],
            pids_limit=64,
            **(host_options or {}),
        )
        name = f"platter-helper-{uuid.uuid4().hex[:12]}"
        labels = {"platter.site": settings.PLATTER_SITE, "platter.helper": "1", **(labels or {})}
        container = self._call(
            lambda api: api.create_container(
                image,
                command,
                name=name,
                labels=labels,
                host_config=host_config,
                detach=True,
                entrypoint=entrypoint,
                environment=environment,
            ),
            "create a helper container",
        )
        try:
            self._call(lambda api: api.start(container["Id"]), "start a helper container")
            # The SDK's wait has no timeout of its own: a helper stuck on a hung disk would
            # hold its worker slot for good.
            status = self._call(
                lambda api: api.wait(container["Id"], timeout=settings.NODE_HELPER_TIMEOUT),
                "wait for a helper container",
            )
            output = self._call(
                lambda api: api.logs(container["Id"], stdout=True, stderr=True),
                "read a helper's output",
            ).decode(errors="replace")
            return status.get("StatusCode", -1), output
        finally:
            try:
                api.remove_container(container["Id"], force=True)
            except Exception:  # noqa: BLE001 (the reconciler removes leftovers)
                log.warning("node %s: could not remove helper %s", self.name, name)

    def set_firewall(self, script: str) -> None:
        """Load an nft script into the node's own network namespace (a helper with NET_ADMIN
        in the host's network, from NODE_FIREWALL_IMAGE): apps/clusters/perimeter.py writes
        scripts that replace one table of Platter's whole, in one transaction."""
        code, output = self.run_helper(
            ["/bin/sh", "-c", 'printf "%s" "$PLATTER_RULES" | nft -f -'],
            [],
            ("NET_ADMIN",),
            image=settings.NODE_FIREWALL_IMAGE,
            network_mode="host",
            environment={"PLATTER_RULES": script},
        )
        if code != 0:
            raise NodeRefused(self.name, f"its firewall refused the rules: {output.strip()[-300:]}")

    # -------------------------------------------------------------- images and networks

    def images(self) -> list[str]:
        """Every "repo:tag" the node holds, sorted."""
        return repo_tags(self._call(lambda api: api.images(), "list images"))

    def has_image(self, image: str) -> bool:
        try:
            self._call(lambda api: api.inspect_image(image), f"inspect image {image}")
        except NodeMissing:
            return False
        return True

    def ensure_image(self, image: str) -> None:
        """Use the node's copy of the image, else pull it; a failed pull names the image."""
        if self.has_image(image):
            return
        try:  # the SDK splits off the tag (or digest) itself, defaulting to latest
            self._call(lambda api: api.pull(image), f"pull {image}")
        except NodeError as error:
            raise NodeMissing(
                self.name,
                f"image {image} is not on the node and could not be pulled: {error.message}",
            ) from error

    def image_labels(self, reference: str) -> dict[str, str] | None:
        """The labels of an image the node holds, or None when it has no such image."""
        try:
            info = self._call(lambda api: api.inspect_image(reference), f"inspect {reference}")
        except NodeMissing:
            return None
        return (info.get("Config") or {}).get("Labels") or {}

    def import_image(self, tar_path: Path, reference: str, changes: list[str]) -> None:
        """A root file system tar as the image `reference` (Dockerfile `changes` applied)."""
        repository, tag = reference.rsplit(":", 1)
        self._call(
            lambda api: api.import_image(
                src=str(tar_path), repository=repository, tag=tag, changes=changes
            ),
            f"import {reference}",
        )

    def build_image(
        self,
        context: BinaryIO,
        reference: str,
        *,
        buildargs: dict | None = None,
        labels: dict | None = None,
    ) -> str:
        """Build `reference` from a tar build context; returns the build's output, or raises
        NodeRefused with the step that failed."""
        what = f"build {reference}"
        stream = self._call(
            lambda api: api.build(
                fileobj=context,
                custom_context=True,
                tag=reference,
                buildargs=buildargs,
                labels=labels,
                rm=True,
                forcerm=True,
                decode=True,
            ),
            what,
        )
        output = []
        try:
            for chunk in stream:
                if "error" in chunk:
                    raise NodeRefused(self.name, f"{what}: {chunk['error'].strip()}")
                output.append(chunk.get("stream", ""))
        except DockerException as error:
            raise engine.classify(self.name, error, what) from error
        return "".join(output)

    def push_image(self, reference: str, auth: dict | None = None) -> None:
        """Push ``registry/repository:tag`` (``auth``: the registry's sign-in, for this call
        only; the engine keeps no credentials)."""
        self._transfer("push", reference, auth)

    def pull_image(self, reference: str, auth: dict | None = None) -> None:
        """Pull ``registry/repository:tag``; layers the engine holds already are not fetched."""
        self._transfer("pull", reference, auth)

    def _transfer(self, verb: str, reference: str, auth: dict | None) -> None:
        """A push or a pull, its progress read to the end: an error there (a refused sign-in,
        an unknown certificate) is raised naming the image."""
        repository, tag = reference.rsplit(":", 1)
        what = f"{verb} {reference}"
        lines = self._call(
            lambda api: getattr(api, verb)(
                repository, tag, stream=True, decode=True, auth_config=auth
            ),
            what,
        )
        try:
            for line in lines:
                if "error" in line:
                    raise NodeRefused(self.name, f"{what}: {line['error']}")
        except DockerException as error:
            raise engine.classify(self.name, error, what) from error

    def tag_image(self, source: str, target: str) -> None:
        repository, tag = target.rsplit(":", 1)
        self._call(lambda api: api.tag(source, repository, tag), f"tag {source} as {target}")

    def untag_image(self, reference: str) -> None:
        """Drop one name of an image (its layers stay while another name holds them); no
        such name is fine."""
        with suppress(NodeMissing):
            self._call(lambda api: api.remove_image(reference, noprune=True), f"untag {reference}")

    def remove_all_containers(self) -> None:
        """Every container of the engine, ours or not (a lab daemon being taken down)."""
        for found in self._call(lambda api: api.containers(all=True), "list containers"):
            self.remove(found["Id"])

    def ensure_network(self, name: str, subnet: str, gateway: str, parent: str) -> None:
        """A macvlan network on the node on first use; an existing one is kept."""

        def create(api: docker.APIClient) -> None:
            if api.networks(names=[name]):
                return
            ipam = docker.types.IPAMConfig(
                pool_configs=[docker.types.IPAMPool(subnet=subnet, gateway=gateway)]
            )
            api.create_network(name, driver="macvlan", ipam=ipam, options={"parent": parent})

        self._call(create, f"create the network {name}")


# A path's mode as the Engine reports it is Go's os.FileMode: its type in the high bits.
FILE_KINDS = (
    (1 << 31, "a folder"),
    (1 << 27, "a symbolic link"),
    (1 << 26, "a device"),
    (1 << 25, "a named pipe"),
    (1 << 24, "a socket"),
    (1 << 21, "a device"),
    (1 << 19, "not a regular file"),
)


def file_kind(stat: dict) -> str:
    """What an Engine stat (stat(), get_archive's) says a path is: "a regular file", "a
    folder", "a symbolic link", ..."""
    mode = int(stat.get("mode", 1 << 19))
    return next((kind for bit, kind in FILE_KINDS if mode & bit), "a regular file")


class _Chunks(io.RawIOBase):
    """An HTTP body's chunks as a file, for tarfile's stream mode (a few KiB held at once)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks, self._rest = iter(chunks), b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self._rest:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._rest = chunk
        size = min(len(buffer), len(self._rest))
        buffer[:size], self._rest = self._rest[:size], self._rest[size:]
        return size


def _read_error(node: str, path: str, error: BaseException) -> BaseException:
    """An error met while reading a file's archive, as a NodeError (others as they are)."""
    if isinstance(error, NodeError):
        return error
    if isinstance(error, tarfile.TarError):
        return NodeRefused(node, f"read {path}: the Engine sent a broken archive ({error})")
    if isinstance(error, (OSError, DockerException)):
        return engine.classify(node, error, f"read {path}")
    return error


def repo_tags(images: list[dict]) -> list[str]:
    """The "repo:tag" names in an Engine API image listing (untagged images have none)."""
    return sorted({t for i in images for t in i.get("RepoTags") or [] if t != "<none>:<none>"})


def _cut(stream: docker.types.CancellableStream) -> None:
    """End a log stream, from any thread. The SDK's close() shuts the socket down for tcp://
    and unix://, but over ssh:// the "socket" is an ssh process (its file has a `channel`, the
    SDK's SSHSocket), which close() ends."""
    try:
        raw = stream._response.raw  # type: ignore[attr-defined]  # the SDK keeps it private
        channel = getattr(raw._fp.fp, "channel", None)
        if channel is not None:
            channel.close()
        else:
            stream.close()
    except (AttributeError, OSError, DockerException):  # already ended
        pass


# -------------------------------------------------------------- the factory tests can swap

_factory: Callable[[Endpoint], NodeClient] = NodeClient


def client(node: Endpoint) -> NodeClient:
    """The client for a node: the real one, or the fake a unit test installed. Inside a web
    request's node call (portal.streams.node_call) the request's database connections go back
    first: what follows waits on the node."""
    streams.before_node_call()
    return _factory(node)


@contextmanager
def installed(factory: Callable[[Endpoint], NodeClient]) -> Iterator[None]:
    """Use `factory` for every node within the block (apps.nodes.fake.FakeNodes)."""
    global _factory
    previous, _factory = _factory, factory
    try:
        yield
    finally:
        _factory = previous
