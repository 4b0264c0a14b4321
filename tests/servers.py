"""Throwaway servers on loopback for the scale-out tests: a PostgreSQL cluster made with
`initdb` in a temporary folder (Debian's `postgresql` package; `make postgres` installs
it), started on a free port, removed when the session ends."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from app.llm.gateway import free_port

POSTGRES_ROLE = "hoprag"
POSTGRES_START_TIMEOUT_S = 60


def postgres_bin(name: str) -> str:
    """A PostgreSQL server program: on PATH, else where Debian puts it (not on PATH)."""
    found = shutil.which(name) or next(
        iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)), None
    )
    if found is None:
        raise RuntimeError(f"no PostgreSQL `{name}`: run `make postgres` (Debian's postgresql)")
    return found


def _run_as() -> dict[str, Any]:
    """`initdb` and `postgres` refuse to run as root: as root, run them as the `postgres`
    user the package creates (else `nobody`)."""
    if os.geteuid() != 0:
        return {}
    for name in ("postgres", "nobody"):
        try:
            user = pwd.getpwnam(name)
        except KeyError:
            continue
        return {"user": user.pw_uid, "group": user.pw_gid}
    raise RuntimeError("running as root, and no `postgres` or `nobody` user to run PostgreSQL as")


@contextmanager
def postgres_server() -> Iterator[str]:
    """A fresh PostgreSQL cluster on a free loopback port; its connection string. The
    folder is outside pytest's (root-only) temporary tree, so that the server's user can
    reach it."""
    who = _run_as()
    folder = Path(tempfile.mkdtemp(prefix="hoprag-pg-"))
    if who:
        os.chown(folder, who["user"], who["group"])
    data, log = folder / "data", folder / "server.log"
    port = free_port()

    def run(*args: str) -> None:
        proc = subprocess.run(
            list(args), cwd=folder, capture_output=True, text=True, timeout=120, **who
        )
        if proc.returncode != 0:
            tail = log.read_text()[-2000:] if log.is_file() else ""
            raise RuntimeError(f"{' '.join(args[:2])} failed: {proc.stderr[-2000:]}{tail}")

    run(postgres_bin("initdb"), "-D", str(data), "-U", POSTGRES_ROLE, "--auth=trust", "-E", "UTF8")
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off"
    pg_ctl = postgres_bin("pg_ctl")
    run(pg_ctl, "-D", str(data), "-l", str(log), "-o", options, "-w",
        "-t", str(POSTGRES_START_TIMEOUT_S), "start")  # fmt: skip
    try:
        yield f"postgresql://{POSTGRES_ROLE}@127.0.0.1:{port}/postgres"
    finally:
        run(pg_ctl, "-D", str(data), "-m", "fast", "-w", "stop")
        shutil.rmtree(folder, ignore_errors=True)
