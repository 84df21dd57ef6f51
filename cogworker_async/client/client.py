"""``Client``: enqueue jobs now or later, from anywhere, and ask about them.

Assembled from what it does, one module each: its connection and what it
holds for its life (``lifecycle.py``), the questions about one job
(``asking.py``: result, status, abort) and the enqueue paths
(``enqueueing.py``, with ``pushes.py`` and ``enqueue_many.py``).

Enqueued by name (``by_name.py``), a job declared in this process takes its
own options; an unknown name goes to the given queue, else ``default``, and
the client says so, and what the live processes suggest is wrong.
"""

from __future__ import annotations

from cogworker_async.client.aborting import AbortOutcome
from cogworker_async.client.by_name import EnqueuedByName
from cogworker_async.client.enqueue_many import EnqueuedMany
from cogworker_async.client.enqueueing import Enqueueing, _due
from cogworker_async.client.handle import JobHandle

# EnqueuedByName (what enqueue_by_name returns) is part of this module's API;
# _due stays importable here (the duration tests read it).
__all__ = ["AbortOutcome", "Client", "EnqueuedByName", "EnqueuedMany", "JobHandle", "_due"]


class Client(Enqueueing):
    """Enqueues jobs. Use as ``async with Client(settings) as client:`` or call ``close()``.

    ``Client(settings=None, *, redis=None, middleware=())``: without ``redis`` it
    makes (and closes) its own connection pool from the settings; ``middleware``
    sees each job's payload before it is written (and may drop it).
    """
