"""The Postgres database that HOPRAG_POSTGRES_URL names: checkpoints and the QA cache
share it, so that every process that serves or answers sees the same threads and the
same cached sub-answers."""

from __future__ import annotations

import glob
import hashlib
import logging
import os
import pwd
import re
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from app.errors import ServiceError
from app.llm.engine import free_port
from app.settings import POSTGRES_CONNECT_TIMEOUT_S, POSTGRES_ROLE, POSTGRES_START_TIMEOUT_S


def redact(url: str) -> str:
    """A connection string fit for an error message: the password replaced."""
    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", url)


def connect(url: str, what: str, **options: Any) -> Any:
    """An autocommit connection to `url`; one that fails is a `ServiceError` naming `what`
    the database holds ("checkpoint", "QA cache"), with the password hidden."""
    import psycopg  # lazy: only a Postgres deployment needs it

    # A connection lost mid-run is reported once, as a ServiceError: psycopg's warnings
    # as it cleans up after it ("error ignored terminating ...") would add lines to it.
    logging.getLogger("psycopg").setLevel(logging.ERROR)
    try:
        return psycopg.Connection.connect(
            url,
            autocommit=True,
            connect_timeout=POSTGRES_CONNECT_TIMEOUT_S,
            **options,
        )
    except psycopg.Error as exc:
        raise unreachable(url, what, exc) from None


def unreachable(url: str, what: str, exc: Exception) -> ServiceError:
    return ServiceError(
        f"the Postgres {what} database {redact(url)} does not answer: {_first_line(exc)}",
        hint="check HOPRAG_POSTGRES_URL, or unset it to keep both in local SQLite files",
    )


def dropped(url: str, what: str, exc: Exception) -> ServiceError:
    """A connection that was open and is lost (the database stopped or restarted mid-run):
    unlike `unreachable`, the settings are right and only the database must come back."""
    return ServiceError(
        f"the Postgres {what} database {redact(url)} dropped the connection: {_first_line(exc)}",
        hint="check that the database is running",
    )


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


def postgres_bin(name: str) -> str:
    """A PostgreSQL server program: on PATH, else where Debian puts it (not on PATH)."""
    found = shutil.which(name) or next(
        iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)), None
    )
    if found is None:
        raise ServiceError(
            f"no PostgreSQL `{name}` on this machine",
            hint="run `make postgres` (Debian's postgresql), or set HOPRAG_POSTGRES_URL",
        )
    return found


def run_as() -> dict[str, Any]:
    """`initdb` and `postgres` refuse to run as root: as root, run them as the `postgres`
    user the package creates (else `nobody`); subprocess keyword arguments."""
    if os.geteuid() != 0:
        return {}
    for name in ("postgres", "nobody"):
        try:
            user = pwd.getpwnam(name)
        except KeyError:
            continue
        return {"user": user.pw_uid, "group": user.pw_gid}
    raise ServiceError("running as root, and no `postgres` or `nobody` user to run PostgreSQL as")


@contextmanager
def local_cluster(folder: Path, durable: bool = True) -> Iterator[str]:
    """A PostgreSQL cluster of its own in `folder` (made with `initdb` the first time, kept
    afterwards), started on a free loopback port for the block; its connection string.
    `folder` must be reachable by the user `run_as` picks (not under /root for root).
    Not `durable`: no fsync, for a throwaway cluster."""
    who = run_as()
    data, log = folder / "data", folder / "server.log"
    folder.mkdir(parents=True, exist_ok=True)
    if who:
        os.chown(folder, who["user"], who["group"])

    def run(*args: str) -> None:
        proc = subprocess.run(
            list(args), cwd=folder, capture_output=True, text=True, timeout=120, **who
        )
        if proc.returncode != 0:
            tail = log.read_text(errors="replace")[-2000:] if log.is_file() else ""
            raise ServiceError(f"{' '.join(args[:2])} failed: {proc.stderr[-2000:]}{tail}")

    if not (data / "PG_VERSION").is_file():
        run(postgres_bin("initdb"), "-D", str(data), "-U", POSTGRES_ROLE, "--auth=trust",
            "-E", "UTF8")  # fmt: skip
    port = free_port()
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1"
    if not durable:
        options += " -c fsync=off"
    pg_ctl = postgres_bin("pg_ctl")
    run(pg_ctl, "-D", str(data), "-l", str(log), "-o", options, "-w",
        "-t", str(POSTGRES_START_TIMEOUT_S), "start")  # fmt: skip
    try:
        yield f"postgresql://{POSTGRES_ROLE}@127.0.0.1:{port}/postgres"
    finally:
        run(pg_ctl, "-D", str(data), "-m", "fast", "-w", "stop")


def cluster_folder(home: Path) -> Path:
    """Where `hoprag serve --production` keeps its own cluster: HOPRAG_HOME/postgres, or,
    as root, a folder in the home of the user PostgreSQL runs as (it cannot reach root's)."""
    who = run_as()
    if not who:
        return home / "postgres"
    tag = hashlib.sha256(str(home.resolve()).encode()).hexdigest()[:8]  # one per HOPRAG_HOME
    return Path(pwd.getpwuid(who["user"]).pw_dir) / f"hoprag-{tag}"
