"""A user's own program around ``await Worker(...).run()``, for the signal tests.

Run as ``python -m tests.own_main``: settings from ``COGWORKER_*``, the jobs of
``tests.jobs_for_tests``. It prints ``READY`` before the worker runs and
``FINALLY <identity>`` from its own ``finally:``, which a signal that kills
the process would skip.
"""

from __future__ import annotations

import asyncio

from cogworker_async import Settings, Worker


async def main() -> None:
    worker = Worker(Settings(), jobs=["tests.jobs_for_tests"])
    try:
        print("READY", worker.identity, flush=True)
        await worker.run()
    finally:
        print("FINALLY", worker.identity, flush=True)


if __name__ == "__main__":
    asyncio.run(main())
