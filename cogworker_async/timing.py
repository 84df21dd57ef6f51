"""Pure maths of time: retry backoff, idle back-off, poll-interval scaling.

Every function takes ``now``/``rng`` as arguments so tests pin exact values.
"""

from __future__ import annotations

import math
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


# --- durations -----------------------------------------------------------------
#
# The one rule every duration option goes through (delay, ``--in``, ``at``'s
# distance from now, timeout, keep_result, unique_for, retry_in's answer,
# periodic every/grace/TTLs, the duration settings): a real number of seconds,
# finite, within MAX_DURATION. Without a maximum, a huge value is accepted and
# then breaks where it is used: Redis refuses an EXPIRE past its range (the
# key is then kept with no expiry at all, or a script fails with a raw
# ``ResponseError``) and a job scheduled 1e300 s ahead never runs.
MAX_DURATION = 10 * 365 * 24 * 3600.0  # 10 years (315,360,000 s)


def check_duration(value: object, option: str, *, zero_ok: bool = False) -> float:
    """``value`` as seconds, or a ``TypeError``/``ValueError`` naming ``option``.

    A number (not a bool), finite, above 0 (or at least 0 with ``zero_ok``),
    at most ``MAX_DURATION``.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{option} must be a number of seconds, got {value!r}")
    seconds = float(value)
    low = "0 or more" if zero_ok else "above 0"
    if not (math.isfinite(seconds) and (seconds >= 0 if zero_ok else seconds > 0)):
        raise ValueError(f"{option} must be a finite number of seconds, {low}: got {value}")
    if seconds > MAX_DURATION:
        raise ValueError(f"{option} must be at most {MAX_DURATION:.0f} s (10 years): got {value:g}")
    return seconds
