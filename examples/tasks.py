"""Sample jobs for the demo and the README tour."""

from __future__ import annotations

import asyncio
import hashlib
import logging

from cogworker_async import current_job, job

log = logging.getLogger(__name__)


@job(name="emails.send", queue="default", retry=3, timeout=30)
async def send_email(to: str, subject: str) -> None:
    """Pretend to talk to a mail server."""
    await asyncio.sleep(0.005)
    log.info("sent %r to %s (jid %s)", subject, to, current_job().jid)


@job(name="images.thumbnail")
def thumbnail(path: str, size: int = 128) -> str:
    """CPU-bound work in a plain def: runs in a worker thread, never stalls the loop."""
    digest = hashlib.sha256(f"{path}:{size}".encode()).hexdigest()
    for _ in range(2000):
        digest = hashlib.sha256(digest.encode()).hexdigest()
    return digest


@job(name="reports.flaky", retry=0)
async def flaky_report(report_id: int) -> None:
    """Always fails: with retry=0 it goes straight to the dead set."""
    raise RuntimeError(f"report {report_id}: upstream said no")


@job(name="reminders.ping")
async def ping(message: str) -> None:
    log.info("reminder: %s", message)
