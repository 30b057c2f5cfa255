"""Where `platter login` keeps the portal's URL and the user's token: a TOML file readable by
its owner only, under the XDG config home. PLATTER_URL and PLATTER_TOKEN override it."""

import json
import os
import stat
import tomllib
from dataclasses import dataclass
from pathlib import Path

from .errors import CliError, ExitCode

DEFAULT_URL = "http://127.0.0.1:8000"


@dataclass
class Settings:
    url: str | None = None
    token: str | None = None
    user: str | None = None


def config_dir() -> Path:
    home = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(home) / "platter"


def config_path() -> Path:
    return config_dir() / "config.toml"


def load() -> Settings:
    """What the file says (nothing if there is none); the environment is applied by current()."""
    path = config_path()
    try:
        text = path.read_text()
    except FileNotFoundError:
        return Settings()
    except OSError as error:
        raise CliError(f"cannot read {path}: {error.strerror}", ExitCode.AUTH) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise CliError(
            f"{path} is not valid TOML ({error}): fix it or log in again", ExitCode.AUTH
        ) from None
    return Settings(
        url=_text(data.get("url")), token=_text(data.get("token")), user=_text(data.get("user"))
    )


def current() -> Settings:
    """The file's settings with PLATTER_URL and PLATTER_TOKEN taking precedence. The stored
    token goes only to the portal it was stored for: another PLATTER_URL needs its own
    PLATTER_TOKEN."""
    found = load()
    url = os.environ.get("PLATTER_URL") or found.url
    url = normal_url(url) if url else None
    stored = found.token if found.url and url == normal_url(found.url) else None
    token = os.environ.get("PLATTER_TOKEN") or stored
    user = found.user if token and token == stored else None
    return Settings(url=url, token=token, user=user)


def save(settings: Settings) -> Path:
    """Write the file with mode 0600 (its folder 0700) before any secret is in it, and
    replace the old one atomically, so the token is never readable by others."""
    folder = config_dir()
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.chmod(0o700)  # ours alone (the token, known hosts), even if made looser before
    path = config_path()
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    lines = [
        f"{key} = {_toml_string(value)}\n"
        for key, value in (
            ("url", settings.url),
            ("token", settings.token),
            ("user", settings.user),
        )
        if value
    ]
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(descriptor, 0o600)  # whatever the umask or an old file said
        with os.fdopen(descriptor, "w") as file:
            file.write("# written by `platter login`; keep it private (mode 0600)\n")
            file.writelines(lines)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return path


def loosely_readable(path: Path) -> bool:
    """True when group or others may read the file (someone chmod'ed it)."""
    try:
        return bool(path.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO))
    except OSError:
        return False


def normal_url(url: str) -> str:
    """The portal's base URL: scheme and host, no trailing slash or /api/v1."""
    url = url.strip().rstrip("/")
    if url.endswith("/api/v1"):
        url = url[: -len("/api/v1")]
    if not url.startswith(("http://", "https://")):
        raise CliError(
            f"the portal URL must start with http:// or https://, got {url!r}", ExitCode.USAGE
        )
    return url


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _toml_string(value: str) -> str:
    # JSON's escapes (\", \\, \n, \uXXXX) are TOML basic-string escapes too.
    return json.dumps(value, ensure_ascii=False)
