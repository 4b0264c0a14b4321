"""Who may call the server, and whose threads each caller sees (langgraph.json `auth`).

LangGraph Server's own auth hook, which Aegra reads from the same `auth` key. With API
tokens (HOPRAG_API_TOKENS_FILE, HOPRAG_API_TOKENS; app/tokens.py), a request without a
valid one gets a 401. A token is sent as `Authorization: Bearer TOKEN`, or as
`x-api-key: TOKEN`, which is what `langgraph_sdk`'s `api_key` sends. The token's user
name is stamped as the owner into the metadata of every thread, run and cron it makes,
and every read, search, run, stream or change is filtered by it, so another user's
thread is a 404 and absent from searches. The assistants are the graphs of
langgraph.json, shared by all and changed by none.

Without tokens nothing is checked and nothing stamped, as under plain `langgraph dev`,
but only loopback clients are answered: `hoprag serve` refuses any other interface
then, and this covers a server started some other way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langgraph_sdk import Auth

from app.settings import LOOPBACK_HOSTS, OWNER_KEY, Settings
from app.tokens import load_tokens, user_of

TOKENS = load_tokens(Settings())  # read once, when the server starts
LOCAL_USER = "local"  # every caller, when no tokens are configured

auth = Auth()


def _header(headers: Mapping[Any, Any], name: str) -> str:
    """A header from raw ASGI headers (bytes, as LangGraph Server passes them) or decoded
    ones (str, as Aegra does)."""
    value = headers.get(name.encode(), headers.get(name, ""))
    return value.decode("latin-1") if isinstance(value, bytes) else str(value)


def caller(headers: Mapping[Any, Any], client: tuple[str, int] | None) -> str:
    """The name of the user a request comes from; a 401 (403 for a caller no token can
    let in) otherwise. graph/webapp.py asks this before it reads a request's body."""
    if not TOKENS:
        if client is not None and client[0] not in LOOPBACK_HOSTS:
            raise Auth.exceptions.HTTPException(
                status_code=403,
                detail="this server has no API tokens and answers loopback clients only",
            )
        return LOCAL_USER
    bearer = _header(headers, "authorization")
    scheme, _, credential = bearer.partition(" ")
    presented = (
        credential.strip() if scheme.lower() == "bearer" else _header(headers, "x-api-key").strip()
    )
    if not presented:
        raise Auth.exceptions.HTTPException(
            status_code=401,
            detail="an API token is needed: send Authorization: Bearer TOKEN",
            headers={"WWW-Authenticate": "Bearer"},
        )
    name = user_of(TOKENS, presented)
    if name is None:
        raise Auth.exceptions.HTTPException(
            status_code=401,
            detail="the API token is not valid",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return name


@auth.authenticate
async def authenticate(
    headers: Mapping[Any, Any], scope: Mapping[str, Any] | None = None
) -> Auth.types.MinimalUserDict:
    """LangGraph Server passes the ASGI scope too; Aegra only the headers, so its loopback
    rule without tokens is kept by graph/webapp.py's check, which sees the client."""
    return {"identity": caller(headers, (scope or {}).get("client"))}


@auth.on
async def owner_only(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str] | None:
    """Threads, runs and crons: stamped with their maker, seen by their maker only."""
    if not TOKENS:
        return None
    owner = {OWNER_KEY: ctx.user.identity}
    if isinstance(value, dict):  # in place: the server stores the dict it passed in
        if value.get("metadata") is None:
            value["metadata"] = {}
        value["metadata"].update(owner)
    return owner


@auth.on.assistants
async def shared_assistants(ctx: Auth.types.AuthContext, value: Any) -> None:
    """Assistants are the graphs of langgraph.json: any user may read and run them, and
    none may add or change one, as that would be seen by all."""
    if TOKENS and ctx.action not in ("read", "search"):
        raise Auth.exceptions.HTTPException(
            status_code=403,
            detail="assistants are the graphs of langgraph.json; send settings in a run's "
            "context instead",
        )


@auth.on.crons
async def no_crons(ctx: Auth.types.AuthContext, value: Any) -> None:
    """Scheduled runs are off: hoprag answers a question when one is asked, and a cron
    would run graphs, and spend the model, with nobody waiting for the answer."""
    raise Auth.exceptions.HTTPException(
        status_code=403, detail="scheduled runs (crons) are off on this server"
    )
