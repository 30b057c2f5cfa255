"""A bench's own database on the portal's PostgreSQL server (the settings' DATABASES), dropped
and made again at each run, so a bench never touches the dev portal's rows."""

import psycopg
from django.conf import settings


def server_dsn(dbname: str) -> str:
    db = settings.DATABASES["default"]
    return f"host={db['HOST']} port={db['PORT']} user={db['USER']} dbname={dbname}" + (
        f" password={db['PASSWORD']}" if db.get("PASSWORD") else ""
    )


def database_url(dbname: str) -> str:
    db = settings.DATABASES["default"]
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return f"postgres://{db['USER']}{password}@{db['HOST']}:{db['PORT']}/{dbname}"


def recreate_database(admin_db: str, name: str, drop_only: bool = False) -> None:
    """Drop `name` (whoever is connected), then make it empty again unless drop_only."""
    with psycopg.connect(server_dsn(admin_db), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        if not drop_only:
            conn.execute(f"CREATE DATABASE {name}")
