"""Where runs are checkpointed: SQLite in HOPRAG_HOME by default, Postgres when
HOPRAG_POSTGRES_URL is set (one database for every machine that serves or answers), and
how a finished or interrupted run is read back for `hoprag trace` and `hoprag resume`."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.constants import START
from langgraph.types import Overwrite
from langgraph_sdk import get_sync_client

from app.errors import ServiceError, UserError
from app.postgres import connect, dropped
from app.settings import Settings

BRANCH = "branch:to:"


def no_such_run(thread_id: str) -> UserError:
    return UserError(
        f"no run with thread id {thread_id!r}",
        hint="`hoprag ask` prints the thread id of every run",
    )


def already_running(thread_id: str) -> UserError:
    return UserError(
        f"thread {thread_id!r} is already running in another hoprag process",
        hint=f"wait for it to end; `hoprag trace {thread_id}` shows its steps so far",
    )


def _run_key(thread_id: str) -> int:
    """The thread's lock number: a Postgres advisory lock key, and the byte of the SQLite
    lock file that stands for it (56 bits: positive, and past any file size)."""
    return int.from_bytes(hashlib.sha256(thread_id.encode()).digest()[:7], "big")


@contextmanager
def open_checkpointer(
    settings: Settings, *, reading: str | None = None, running: str | None = None
) -> Iterator[BaseCheckpointSaver]:
    """The checkpointer the settings select, its tables created if needed; `reading` a
    thread's runs creates nothing (no SQLite file: no such run). `running` a thread holds
    that thread's lock while the block runs, so that no two processes run it at once; the
    lock goes with the process, even one killed by SIGKILL."""
    if settings.postgres_url:
        with _postgres(settings.postgres_url, running) as saver:
            yield saver
        return
    path = settings.home / "checkpoints.sqlite"
    if reading is not None and not path.is_file():
        raise no_such_run(reading)
    settings.home.mkdir(parents=True, exist_ok=True)
    with _file_lock(path.with_suffix(".lock"), running) if running is not None else nullcontext():
        conn = sqlite3.connect(path, check_same_thread=False)
        try:
            saver = SqliteSaver(conn)
            saver.setup()
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise UserError(
                f"the checkpoint database {path} is damaged ({exc})",
                hint="move it away; hoprag starts a new one (earlier threads are lost)",
            ) from None
        try:
            yield saver
        finally:
            conn.close()


@contextmanager
def _file_lock(path: Path, thread_id: str) -> Iterator[None]:
    """The thread's byte of one lock file beside the SQLite checkpoints (a POSIX record
    lock: one file for every thread, none left behind)."""
    with open(path, "a") as lock:
        try:
            fcntl.lockf(lock, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, _run_key(thread_id))
        except OSError as exc:
            if exc.errno not in (errno.EACCES, errno.EAGAIN):
                raise
            raise already_running(thread_id) from None
        yield


@contextmanager
def _postgres(url: str, running: str | None) -> Iterator[BaseCheckpointSaver]:
    try:  # an optional backend: its packages may be missing
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row
    except ImportError:
        raise UserError(
            "HOPRAG_POSTGRES_URL is set but langgraph-checkpoint-postgres is not installed",
            hint='pip install "langgraph-checkpoint-postgres" "psycopg[binary]"',
        ) from None

    @contextmanager
    def reported_if_lost() -> Iterator[None]:
        """A connection lost mid-run (the database stopped) is one clear `ServiceError`,
        which stops the run with its finished steps saved, not a traceback."""
        try:
            yield
        except psycopg.OperationalError as exc:
            raise dropped(url, "checkpoint", exc) from None

    class Saver(PostgresSaver):
        """PostgresSaver, each call that `hoprag` makes in `reported_if_lost`."""

        def get_tuple(self, *args: Any, **kwargs: Any) -> Any:
            with reported_if_lost():
                return super().get_tuple(*args, **kwargs)

        def list(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
            with reported_if_lost():
                yield from super().list(*args, **kwargs)

        def put(self, *args: Any, **kwargs: Any) -> Any:
            with reported_if_lost():
                return super().put(*args, **kwargs)

        def put_writes(self, *args: Any, **kwargs: Any) -> None:
            with reported_if_lost():
                super().put_writes(*args, **kwargs)

        def delete_thread(self, *args: Any, **kwargs: Any) -> None:
            with reported_if_lost():
                super().delete_thread(*args, **kwargs)

    conn = connect(url, "checkpoint", prepare_threshold=0, row_factory=dict_row)
    with conn:
        saver = Saver(conn)
        saver.setup()
        if running is not None:  # held by this session: it ends with the connection
            row = conn.execute("SELECT pg_try_advisory_lock(%s) AS ok", (_run_key(running),))
            if not row.fetchone()["ok"]:
                raise already_running(running)
        yield saver


@dataclass
class ThreadSummary:
    """A thread as retention sees it: when its last checkpoint was written."""

    thread_id: str
    last: datetime
    metadata: dict[str, Any]


def _thread_ids(saver: BaseCheckpointSaver) -> list[str]:
    """Every thread with a checkpoint. The saver API lists checkpoints, not threads, so
    this reads the `checkpoints` table that SqliteSaver and PostgresSaver both keep."""
    conn = saver.conn  # type: ignore[attr-defined]
    rows = conn.execute("SELECT DISTINCT thread_id FROM checkpoints").fetchall()
    return sorted(str(r["thread_id"] if isinstance(r, dict) else r[0]) for r in rows)


def list_threads(saver: BaseCheckpointSaver) -> list[ThreadSummary]:
    """Every thread with the time of its last checkpoint, oldest first."""
    threads = []
    for thread_id in _thread_ids(saver):
        latest = saver.get_tuple({"configurable": {"thread_id": thread_id}})
        if latest is None:  # deleted meanwhile, or only a subgraph's checkpoints
            continue
        last = datetime.fromisoformat(latest.checkpoint["ts"])
        last = last if last.tzinfo else last.replace(tzinfo=UTC)
        threads.append(ThreadSummary(thread_id, last, dict(latest.metadata or {})))
    return sorted(threads, key=lambda t: t.last)


def check_retention_days(days: float, what: str) -> float:
    """A number of days to keep threads: positive and finite, else a clear error."""
    if not 0 < days < float("inf"):
        raise UserError(
            f"{what} must be a positive number of days, not {days:g}",
            hint="say 30 to delete threads whose last run is more than 30 days old",
        )
    return days


def prune_threads(
    saver: BaseCheckpointSaver,
    older_than_days: float,
    *,
    now: datetime | None = None,
    dry_run: bool = False,
) -> list[ThreadSummary]:
    """Delete every checkpoint, write and blob of the threads whose last checkpoint is
    older than `older_than_days`; the threads deleted (or, `dry_run`, due)."""
    check_retention_days(older_than_days, "--older-than")
    cutoff = (now or datetime.now(UTC)) - timedelta(days=older_than_days)
    old = [t for t in list_threads(saver) if t.last < cutoff]
    if not dry_run:
        for thread in old:
            saver.delete_thread(thread.thread_id)
    return old


@dataclass
class Step:
    """One node of a run, as checkpointed: what it wrote."""

    node: str
    update: dict[str, Any]


@dataclass
class RunRecord:
    """The last run (turn) of a thread, read back from its checkpoints."""

    thread_id: str
    metadata: dict[str, Any]
    steps: list[Step] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)
    pending: list[str] = field(default_factory=list)  # nodes due when the run stopped

    @property
    def finished(self) -> bool:
        return not self.pending


def _plain(value: Any) -> Any:
    """A channel write as the node meant it: `Overwrite(x)`, or its JSON form from a
    server (`{"type": "__overwrite__", "value": x}`), is x."""
    if isinstance(value, Overwrite):
        return value.value
    if isinstance(value, dict) and value.get("type") == "__overwrite__" and "value" in value:
        return value["value"]
    return value


def _due(checkpoint: Any) -> list[str]:
    """The nodes a checkpoint has triggered to run next."""
    return [
        c[len(BRANCH) :] for c in checkpoint.checkpoint["channel_values"] if c.startswith(BRANCH)
    ]


def _namespace(checkpoint: Any) -> str:
    """The checkpoint's namespace: "" for the graph's own, "<node>:<task id>" for those of
    a subgraph that the graph's node ran (DeFT's hop)."""
    return str(checkpoint.config["configurable"].get("checkpoint_ns") or "")


def read_run(saver: BaseCheckpointSaver, thread_id: str) -> RunRecord:
    """The thread's last run: each node with its writes, the state it ended in, and the
    nodes still due if it stopped early. Reads the checkpoints alone: no model loads.

    A subgraph run as a node (DeFT's hop) checkpoints under a namespace of its own: its
    steps are listed where they ran, in place of the node that ran them (whose writes
    only repeat theirs), and a run stopped inside it is due at the subgraph's next step.
    Checkpoint ids grow with time; subgraphs that ran at once (a comparison's fan-out)
    are listed one after the other, each from where it started."""
    saved = list(saver.list({"configurable": {"thread_id": thread_id}}))
    started: dict[str, str] = {}
    for t in saved:
        started[_namespace(t)] = min(started.get(_namespace(t), "~"), t.checkpoint["id"])

    def in_order(t: Any) -> tuple[str, str]:
        inside = _namespace(t)
        return (started[inside] if inside else t.checkpoint["id"], t.checkpoint["id"])

    history = sorted(saved, key=in_order)
    runs = [t for t in history if not _namespace(t)]
    if not runs:
        raise no_such_run(thread_id)
    starts = [i for i, t in enumerate(runs) if t.metadata.get("source") == "input"]
    first = runs[starts[-1] if starts else 0].checkpoint["id"]
    turn = [t for t in history if t.checkpoint["id"] >= first]
    subgraphs = {_namespace(t).split(":")[0] for t in turn if _namespace(t)}
    last = {_namespace(t): t for t in turn}  # each namespace's last checkpoint
    record = RunRecord(thread_id, dict(runs[-1].metadata or {}))
    for checkpoint in turn:
        due, inside = _due(checkpoint), _namespace(checkpoint)
        if not due or (not inside and due[0] in subgraphs):
            continue
        update = {
            channel: _plain(value)
            for _, channel, value in checkpoint.pending_writes or []
            if not channel.startswith(BRANCH) and not channel.startswith("__")
        }
        if update or checkpoint is not last[inside]:
            record.steps.append(Step(due[0], update))
    record.values = dict(runs[-1].checkpoint["channel_values"])
    # A run whose input alone was saved (its server killed before the first node ended)
    # is due at the graph's start.
    unstarted = START in runs[-1].checkpoint["channel_values"]
    record.pending = _due(runs[-1]) or ([START] if unstarted else [])
    if record.pending and _namespace(turn[-1]) and _due(turn[-1]):
        record.pending = _due(turn[-1])  # stopped inside a subgraph: its next step
    return record


def read_server_run(url: str, thread_id: str) -> RunRecord:
    """The thread's last run on a LangGraph server (`hoprag serve`), which keeps its own
    threads: the same record as `read_run`, from the thread's state history (each state's
    tasks carry the writes of the node that ran; a task that ran a subgraph names the
    subgraph's checkpoint namespace, whose history gives its steps)."""
    client = get_sync_client(url=url)
    try:
        history = client.threads.get_history(thread_id, limit=1000)[::-1]
    except httpx.HTTPStatusError as exc:
        if exc.response.status_code in (404, 422):
            raise no_such_run(thread_id) from None
        raise ServiceError(f"the server at {url} answered {exc.response.status_code}") from None
    except httpx.TransportError as exc:
        raise UserError(
            f"no LangGraph server answers at {url} ({type(exc).__name__})",
            hint="start one with `hoprag serve`, or check --url",
        ) from None
    if not history:
        raise no_such_run(thread_id)
    starts = [i for i, s in enumerate(history) if (s["metadata"] or {}).get("source") == "input"]
    turn = history[starts[-1] if starts else 0 :]
    metadata = dict(turn[-1]["metadata"] or {})
    metadata.setdefault("system", metadata.get("graph_id", "?"))
    metadata.setdefault("index", "(the server's default)")
    record = RunRecord(thread_id, metadata)
    record.steps = _server_steps(client, thread_id, turn)
    record.values = dict(turn[-1]["values"])
    record.pending = list(turn[-1]["next"])
    return record


def _server_steps(client: Any, thread_id: str, history: list[dict[str, Any]]) -> list[Step]:
    """The steps of a server thread's states, oldest first: a task's writes, or in place
    of a task that ran a subgraph (DeFT's hop) the steps of the subgraph's own history."""
    steps = []
    for state in history:
        for task in state["tasks"]:
            if task["name"].startswith("__"):
                continue
            namespace = (task.get("checkpoint") or {}).get("checkpoint_ns")
            if namespace:
                inner = client.threads.get_history(
                    thread_id, limit=1000, checkpoint={"checkpoint_ns": namespace}
                )
                steps += _server_steps(client, thread_id, inner[::-1])
            elif task.get("result") is not None:
                update = {k: _plain(v) for k, v in task["result"].items()}
                steps.append(Step(task["name"], update))
    return steps
