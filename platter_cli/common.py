"""What the commands share (main.py's and `platter jobs`'): --json and its errors, JSON output,
the API client of the saved login, and a cluster named by id or name."""

import functools
import json
import os
import sys
from collections.abc import Callable
from typing import Any

import click

from . import config
from .api import Api
from .errors import CliError, ExitCode

LOG_FOLLOW_SECONDS = 300  # the API's longest follow; the command asks again after it


def emit(data: Any) -> None:
    click.echo(json.dumps(data, indent=2))


def emit_line(data: Any) -> None:
    click.echo(json.dumps(data), nl=True)
    sys.stdout.flush()


def with_json(command: Callable) -> Callable:
    """--json on a command; its errors then also go to stdout as JSON (with exit_code), and
    Ctrl-C ends it with 130 and no traceback."""

    @click.option(
        "--json",
        "as_json",
        is_flag=True,
        help="Machine-readable JSON on stdout (errors too, with exit_code).",
    )
    @functools.wraps(command)
    def wrapper(*args: Any, as_json: bool, **kwargs: Any) -> Any:
        try:
            return command(*args, as_json=as_json, **kwargs)
        except CliError as error:
            error.as_json = as_json
            raise
        except KeyboardInterrupt:
            error = CliError("interrupted", ExitCode.INTERRUPTED)
            error.as_json = as_json
            raise error from None
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as bug:
            if os.environ.get("PLATTER_DEBUG"):
                raise
            error = CliError(
                f"unexpected {type(bug).__name__}: {bug} (a bug in platter: PLATTER_DEBUG=1 "
                "shows where)",
                ExitCode.REFUSED,
            )
            error.as_json = as_json
            raise error from None

    return wrapper


def connect(flags: dict[str, str] | None = None) -> Api:
    path = config.config_path()
    if config.loosely_readable(path):
        click.echo(f"platter: warning: {path} is readable by others; chmod 600 it", err=True)
    return Api(config.current(), flags)


def cluster_id(client: Api, ref: str) -> int:
    """A cluster's id, from its id or the name of one of your live clusters."""
    if ref.isdigit():
        return int(ref)
    user = config.current().user
    rows = [
        c
        for c in client.pages("clusters", **({"user": user} if user else {}))
        if c["name"] == ref and c["state"] != "destroyed"
    ]
    if not rows:
        raise CliError(f"you have no live cluster named {ref!r} (`platter ls`)", ExitCode.NOT_FOUND)
    if len(rows) > 1:
        ids = ", ".join(str(c["id"]) for c in rows)
        raise CliError(
            f"{len(rows)} clusters are named {ref!r} (ids {ids}): give the id", ExitCode.USAGE
        )
    return int(rows[0]["id"])
