"""Runs of a replica that stopped, on the production server (Aegra on PostgreSQL).

Aegra runs a run as a task of the process that took the request, and a process that is
killed leaves its runs "running" in the database for ever. So every replica writes a
heartbeat into `hoprag_replicas` every `HEARTBEAT_S`, notes for each run it is asked to
start the thread, itself and the time (`hoprag_run_requests`), and marks as `error` the
pending or running runs whose request went to a replica not seen for `REPLICA_LOST_S`,
with a message that says how to go on. The thread's checkpoints are all there, and
`hoprag resume THREAD_ID` continues the run from the last step that was saved (Aegra
takes no run without input, which is how LangGraph resumes).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any

from app.postgres import connect
from app.settings import HEARTBEAT_S, REPLICA_LOST_S

log = logging.getLogger(__name__)

LOST_RUN = (
    "the server replica running it stopped; its finished steps are saved, and "
    "`hoprag resume THREAD_ID` (with the server's HOPRAG_POSTGRES_URL) finishes it"
)
SCHEMA = """
CREATE TABLE IF NOT EXISTS hoprag_replicas (
    replica TEXT PRIMARY KEY, seen TIMESTAMPTZ NOT NULL
);
CREATE TABLE IF NOT EXISTS hoprag_run_requests (
    thread_id TEXT NOT NULL, replica TEXT NOT NULL, requested TIMESTAMPTZ NOT NULL
);
CREATE INDEX IF NOT EXISTS hoprag_run_requests_thread
    ON hoprag_run_requests (thread_id, requested);
"""
# A run belongs to the last request on its thread made before it was created.
SWEEP = """
WITH owner AS (
    SELECT runs.run_id, runs.thread_id, (
        SELECT q.replica FROM hoprag_run_requests q
        WHERE q.thread_id = runs.thread_id AND q.requested <= runs.created_at
        ORDER BY q.requested DESC LIMIT 1
    ) AS replica
    FROM runs WHERE runs.status IN ('pending', 'running')
), lost AS (
    SELECT owner.run_id, owner.thread_id FROM owner
    LEFT JOIN hoprag_replicas r ON r.replica = owner.replica
    WHERE owner.replica IS NOT NULL
      AND (r.seen IS NULL OR r.seen < now() - make_interval(secs => %(lost_s)s))
), failed AS (
    UPDATE runs SET status = 'error', error_message = %(message)s, updated_at = now()
    FROM lost WHERE runs.run_id = lost.run_id
    RETURNING runs.thread_id
)
UPDATE thread SET status = 'error', updated_at = now()
WHERE thread_id IN (SELECT thread_id FROM failed) AND status = 'busy'
"""


class Replica:
    """This process's heartbeat, its run requests and the sweep of lost runs."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.name = uuid.uuid4().hex
        self.conn: Any = None

    def _execute(self, sql: str, params: Any = None) -> None:
        if self.conn is None or self.conn.closed:
            self.conn = connect(self.url, "server")
        self.conn.execute(sql, params)

    def beat(self) -> None:
        """Heartbeat, then the sweep (the tables Aegra makes exist once it serves)."""
        self._execute(
            "INSERT INTO hoprag_replicas VALUES (%s, now()) "
            "ON CONFLICT (replica) DO UPDATE SET seen = now()",
            (self.name,),
        )
        self._execute(SWEEP, {"lost_s": REPLICA_LOST_S, "message": LOST_RUN})

    def requested(self, thread_id: str) -> None:
        """A run on `thread_id` is about to start here."""
        self._execute(
            "INSERT INTO hoprag_run_requests VALUES (%s, %s, now())", (thread_id, self.name)
        )

    def leave(self) -> None:
        """A clean stop: the others sweep this replica's runs at once."""
        self._execute("DELETE FROM hoprag_replicas WHERE replica = %s", (self.name,))
        self.conn.close()


@contextlib.asynccontextmanager
async def heartbeat(url: str) -> AsyncIterator[Replica]:
    """The replica, beating every HEARTBEAT_S in the background while the server runs."""
    replica = Replica(url)
    await asyncio.to_thread(replica._execute, SCHEMA)

    async def beat() -> None:
        while True:
            try:
                await asyncio.to_thread(replica.beat)
            except Exception as exc:  # a database that is away for a while: try again
                log.warning("replica heartbeat failed: %s", exc)
                replica.conn = None
            await asyncio.sleep(HEARTBEAT_S)

    task = asyncio.create_task(beat())
    try:
        yield replica
    finally:
        task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.to_thread(replica.leave)
