"""Jobs the browser tests' worker runs; each run is recorded in ``<ns>:test:runs``."""

from __future__ import annotations

import asyncio

from cogworker_async import current_job, job
from tests.jobs_for_tests import _record, _redis, _runs_key


@job(name="b.ok")
async def ok(i: int) -> None:
    await _record()


@job(name="b.fails_first", retry=0)
async def fails_first(tag: str) -> None:
    """Fails on its first run (straight to dead: no retries), succeeds after that."""
    jid = current_job().jid
    runs = await _redis().lrange(_runs_key(), 0, -1)
    await _record()
    if not any(r.decode().startswith(jid) for r in runs):
        raise RuntimeError(f"first run of {tag} fails on purpose")


@job(name="b.sleep")
async def sleep(seconds: float) -> None:
    """Busy for ``seconds``: what the Busy card and the Busy page show while it runs."""
    await _record()
    await asyncio.sleep(seconds)


@job(name="b.progress", status=True)
async def progress(seconds: float) -> None:
    """Says it is 40% through, then holds for ``seconds``: the job and Busy pages' bar."""
    await _record()
    current_job().progress(0.4, "resized 40 of 100 images")
    await asyncio.sleep(seconds)
