"""A batch's results where a job needs them: resolved into a chord's callback's
arguments when it starts, and read from inside a batch's callback.

A job after a group carries ``"results_of": {"bid", "count"}`` instead of the
group's results: the worker reads them when the job starts, in the group's
order, ``RESULTS_CHUNK`` a round trip (``store/batch_results.py``), and passes
the list as the first argument, as a copied list was. A missing result (the
member failed, kept none, or its result expired) is None in the list, and a
list shorter than ``count`` (the batch's list expired) is filled with None,
so the callback always gets ``count`` results. A second run of the job reads
the same results again: they are read, never consumed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from cogworker_async.context import current_job, worker_services
from cogworker_async.store.batch_results import read_results

RESULTS_OF = "results_of"  # the payload field (docs/reference/wire.md)


def _reference(job: dict[str, Any]) -> tuple[str, int]:
    ref = job[RESULTS_OF]
    bid = ref.get("bid") if isinstance(ref, dict) else None
    count = ref.get("count") if isinstance(ref, dict) else None
    if (
        not isinstance(bid, str)
        or not bid
        or isinstance(count, bool)
        or not isinstance(count, int)
        or count < 0
    ):
        raise ValueError(
            f'the payload\'s "results_of" must be {{"bid": "<bid>", "count": <n ≥ 0>}}, not {ref!r}'
        )
    return bid, count


async def with_results(job: dict[str, Any], args: Sequence[Any]) -> list[Any]:
    """``args`` with the results the job's ``results_of`` names first (a list of
    ``count``, in member order); ``ValueError`` for a malformed reference."""
    bid, count = _reference(job)
    redis, keys = worker_services()
    values: list[Any] = []
    async for pairs in read_results(redis, keys, bid):
        values.extend(value for _, value in pairs)
        if len(values) >= count:
            break
    del values[count:]
    values.extend([None] * (count - len(values)))
    return [values, *args]


async def batch_results(bid: str | None = None) -> AsyncIterator[Any]:
    """Inside a worker's job: the results of batch ``bid``'s members that keep one,
    in the order they were added (None: failed, or its result is gone), read a
    chunk a round trip. Without ``bid``: the batch whose callback this job is
    (``current_job().callback_batch``); ``RuntimeError`` outside a worker's job,
    ``ValueError`` when this job is no batch's callback."""
    if bid is None:
        bid = current_job().callback_batch
        if bid is None:
            raise ValueError(
                "batch_results() without a bid reads the batch whose callback this job is: "
                "this job is no batch's callback (pass the bid)"
            )
    redis, keys = worker_services()
    async for pairs in read_results(redis, keys, bid):
        for _, value in pairs:
            yield value
