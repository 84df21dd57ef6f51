"""Where the jobs a fetcher holds were fetched from, for the shutdown requeue
and a give back: a payload may name another queue than the one it sat on, and
a job goes back where it was fetched from. Reading one queue, that is it;
reading several, each fetched batch is kept with fetch.lua's (queue, count)
runs: one entry per batch, nothing per job, and batches none of whose jobs is
still ours are dropped every ``SOURCES_PRUNE_AT`` batches or so.

A mixin of ``Fetcher`` (its state is set by ``Fetcher.__init__``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

# Fetched batches remembered (several queues) before the ones none of whose
# jobs is still ours are dropped; at least this many between two looks.
SOURCES_PRUNE_AT = 64


class FetchSources:
    """The fetched batches' sources (state set by ``Fetcher``)."""

    reliable: bool
    sole_queue: str | None
    _batches: list[tuple[Sequence[bytes], Sequence[tuple[str, int]]]]
    _prune_at: int
    ours: Callable[[], Iterable[bytes]]

    def _remember(self, jobs: Sequence[bytes], sources: Sequence[tuple[str, int]]) -> None:
        """Keep where a fetched batch came from (several queues only; after ``_deliver``)."""
        if self.sole_queue is not None or not self.reliable or not jobs:
            return
        self._batches.append((jobs, sources))
        if len(self._batches) >= self._prune_at:
            ours = set(self.ours())
            self._batches = [b for b in self._batches if not ours.isdisjoint(b[0])]
            self._prune_at = max(SOURCES_PRUNE_AT, 2 * len(self._batches))

    def sources_of(self, jobs: Iterable[bytes]) -> dict[bytes, str]:
        """The queue each of ``jobs`` was fetched from, where known (shutdown, give back).

        Unknown for a job whose fetch reply never arrived: it goes back to the
        queue its payload names.
        """
        if self.sole_queue is not None:
            return dict.fromkeys(jobs, self.sole_queue)
        wanted = set(jobs)
        found: dict[bytes, str] = {}
        for batch, runs in self._batches:  # oldest first: a job fetched again, its last source
            start = 0
            for queue, count in runs:
                for raw in batch[start : start + count]:
                    if raw in wanted:
                        found[raw] = queue
                start += count
        return found
