"""Exit codes a script can rely on, and the one exception every command raises to end with
a message instead of a traceback."""

import json
import sys
from enum import IntEnum
from typing import Any

import click


class ExitCode(IntEnum):
    OK = 0
    REFUSED = 1  # the API refused the request (400, 403, 409, ...) or the cluster failed
    USAGE = 2  # bad arguments or options (click's own code for usage errors)
    AUTH = 3  # not logged in, token refused, portal unreachable or failing (5xx)
    NOT_FOUND = 4  # no such cluster, product or version (404)
    QUOTA = 5  # the launch would exceed a quota
    TIMEOUT = 6  # --wait gave up before the cluster got there
    INTERRUPTED = 130  # Ctrl-C, as shells report SIGINT


EXIT_CODES_HELP = """\b
Exit codes:
  0  done
  1  the API refused the request (invalid, conflict, denied) or the cluster failed
  2  usage: bad arguments or options
  3  not logged in, token refused, or the portal cannot be reached or failed
  4  not found: no such cluster, product or version
  5  over quota: the launch would exceed a limit
  6  --wait gave up (--timeout) before the cluster got there
130  interrupted (Ctrl-C)"""


class CliError(click.ClickException):
    """A message for the user and the exit code; with --json also the API's error body (or
    one in its shape) on stdout."""

    def __init__(self, message: str, code: ExitCode, body: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.exit_code = int(code)
        self.body = body
        self.as_json = False

    def show(self, file=None) -> None:
        if self.as_json:
            body = dict(
                self.body
                or {"error": ExitCode(self.exit_code).name.lower(), "message": self.message}
            )
            body["exit_code"] = self.exit_code
            click.echo(json.dumps(body, indent=2))
        click.echo(f"platter: {self.message}", err=True, file=file or sys.stderr)
