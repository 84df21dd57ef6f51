"""The order in which a fetch tries the queues: as given, or drawn by weight."""

from __future__ import annotations

import random
from collections.abc import Sequence

from cogworker_async.settings import QueueSpec


def weighted_order(specs: Sequence[QueueSpec], strict: bool, rng: random.Random) -> list[str]:
    """Queue names in the order to try: as given (strict), or drawn by weight.

    The SPEC's order is "each queue repeated by its weight, shuffled,
    de-duplicated": the first queue is each one with a chance proportional
    to its weight, and each next one likewise among those left. It is drawn
    here as that, by cumulative sums over the queues left, never by building
    the list with one entry per unit of weight (a weight of 20,000,000 made
    every fetch take seconds). Per call: one random draw and one pass over
    the remaining weights for each queue — with the handful of queues a
    worker reads, a few dozen operations at most.
    """
    if strict or len(specs) <= 1:
        return [s.name for s in specs]  # none: every queue paused
    left = list(specs)
    total = sum(s.weight for s in left)
    order: list[str] = []
    while len(left) > 1:
        point = rng.random() * total
        # The first queue whose cumulative weight passes the point; the last
        # one if rounding leaves the point at the very top.
        index = len(left) - 1
        reached = 0
        for position, spec in enumerate(left):
            reached += spec.weight
            if point < reached:
                index = position
                break
        chosen = left.pop(index)
        total -= chosen.weight
        order.append(chosen.name)
    order.append(left[0].name)
    return order
