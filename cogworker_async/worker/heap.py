"""The start-up heap set aside from the garbage collector, in a worker that owns its process.

Imports, job modules, the lifespan and the connections leave some hundred
thousand long-lived objects. The collector's full passes walk every one of
them: the first (about 2 s into a run) stalled the event loop 17-31 ms, and
every job waiting for pickup with it. ``gc.freeze()`` moves them to a
permanent generation no pass walks. One collection first, so no start-up
garbage is frozen with them (it would stay for the life of the process); it
runs before the first job is fetched, where a pause costs nothing.

Only where the worker is the program (the CLI, and each process of a swarm):
a worker embedded in an application would freeze the application's heap too,
which is not the worker's decision to make.
"""

from __future__ import annotations

import gc


def freeze_start_up_heap() -> None:
    """Collect once, then exempt every object alive now from later collections."""
    gc.collect()
    gc.freeze()
