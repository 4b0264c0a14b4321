"""The Postgres database that HOPRAG_POSTGRES_URL names: checkpoints and the QA cache
share it, so that every process that serves or answers sees the same threads and the
same cached sub-answers."""

from __future__ import annotations

import logging
import re
from typing import Any

from app.errors import ServiceError
from app.settings import POSTGRES_CONNECT_TIMEOUT_S


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
