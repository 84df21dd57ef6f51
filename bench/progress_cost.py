"""What progress costs a worker, in process, without Redis: a job that tracks its
status and never reports (``ProgressWriter.begin`` + ``finish``), and one report
(``current_job().progress``, coalesced: no write). A job that tracks no status
pays neither.

    .venv/bin/python -m bench.progress_cost
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from cogworker_async.context import current_job, set_current
from cogworker_async.worker.progress import ProgressWriter

ROUNDS = 200_000


class _NoWrites:
    """Stands in for the status writer: each write counted, none sent."""

    def __init__(self) -> None:
        self.writes = 0

    def write(
        self, jid: str, fields: dict[str, Any], *, after: asyncio.Task[None] | None = None
    ) -> asyncio.Task[None] | None:
        self.writes += 1
        return None


async def main() -> None:
    status = _NoWrites()
    progress = ProgressWriter(status)
    jids = [f"{i:024x}" for i in range(ROUNDS)]
    started = time.perf_counter()
    for jid in jids:
        progress.begin(jid, None)
        progress.finish(jid, None)
    each = (time.perf_counter() - started) / ROUNDS
    print(f"a tracked job that never reports: {each * 1e6:.2f} us (begin + finish)")
    job = {"jid": "f" * 24, "class": "bench.progress", "queue": "default"}
    set_current(job)
    progress.begin(job["jid"], None)
    started = time.perf_counter()
    for done in range(ROUNDS):
        current_job().progress(done / ROUNDS, "working")
    each = (time.perf_counter() - started) / ROUNDS
    progress.finish(job["jid"], None)
    print(
        f"current_job().progress(): {each * 1e6:.2f} us a call; "
        f"{ROUNDS:,} calls, {status.writes} write(s) sent"
    )


if __name__ == "__main__":
    asyncio.run(main())
