"""Pure maths of time: retry backoff, idle back-off, poll-interval scaling.

Every function takes ``now``/``rng`` as arguments so tests pin exact values.
"""

from __future__ import annotations

import random


def retry_backoff(count: int, rng: random.Random) -> float:
    """Seconds before retry number ``count`` (0-based).

    Sidekiq's formula: ``count**4 + 15 + rand(10) * (count + 1)``.
    """
    return float(count**4 + 15 + rng.randrange(10) * (count + 1))


IDLE_BACKOFF_START = 0.25


def idle_backoff(streak: int, maximum: float, rng: random.Random) -> float:
    """How long an idle fetcher waits after ``streak`` empty fetches in a row.

    Starts at 0.25 s and doubles up to ``maximum``; jittered down by up to a
    quarter so that many idle processes do not poll in lockstep.
    """
    base = min(maximum, IDLE_BACKOFF_START * float(2 ** min(streak, 16)))
    return base * (0.75 + 0.25 * rng.random())


def scaled_poll_interval(average: float, live_processes: int, rng: random.Random) -> float:
    """Sidekiq's scaled random poll interval, so the total poll rate stays flat.

    Each of N processes polls every ``N * average`` seconds on average; below 10
    processes the draw is uniform in [0.5, 1.5]× that, from 10 on in [0, 2]×
    (with many processes, the wider spread keeps polls evenly spaced).
    """
    count = max(1, live_processes)
    interval = count * average
    if count < 10:
        return interval * (0.5 + rng.random())
    return interval * 2 * rng.random()


def jittered(interval: float, rng: random.Random, spread: float = 0.1) -> float:
    """``interval`` ± ``spread`` (a fraction), so duties of many processes drift apart."""
    return interval * (1 - spread + 2 * spread * rng.random())
