"""The cost of one periodic tick, in µs, with 1 and 50 entries.

Three cases, each a mean over many ticks against a local redis-server:
- idle: no slot due (what a process pays when it wakes and finds nothing: TIME + arithmetic);
- due, lost: every entry has a slot due and another process already claimed it
  (what each of N-1 processes pays per slot);
- due, won: every entry's slot is claimed and pushed by this process.

    .venv/bin/python bench/periodic_tick.py [--redis-url URL] [--ticks N]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from pathlib import Path

from redis.asyncio import Redis

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import redis_server

from cogworker_async.keys import Keys
from cogworker_async.periodic import cron, every
from cogworker_async.periodic.ticker import Ticker, redis_now

log = logging.getLogger("bench")


async def measure(url: str, count: int, ticks: int) -> dict[str, float]:
    redis = Redis.from_url(url)
    out: dict[str, float] = {}
    try:
        # idle: yearly cron entries, never due during the run
        idle = Ticker(
            redis,
            Keys("bench-idle"),
            [cron("0 0 1 1 *", "noop", name=f"e{i}") for i in range(count)],
            log,
        )
        await idle.tick()  # start()
        t0 = time.perf_counter()
        for _ in range(ticks):
            await idle.tick()
        out["idle"] = (time.perf_counter() - t0) / ticks * 1e6

        entries = [every(1, "noop", name=f"e{i}") for i in range(count)]
        for case in ("won", "lost"):
            ticker = Ticker(redis, Keys("bench-due"), entries, log)
            await ticker.tick()
            elapsed = 0.0
            for i in range(ticks):
                now = await redis_now(redis)
                # Make one slot due for every entry: the one at floor(now).
                for e in entries:
                    ticker._seen[e.name] = now - 1.0
                    ticker._next[e.name] = now - 0.5
                if case == "won":
                    ticker.keys = Keys(f"bench-won-{i}")  # fresh claim keys: this tick wins
                else:
                    ticker.keys = Keys("bench-lost")  # claimed by the first tick, lost after
                    if i == 0:
                        await ticker.tick()
                        continue
                t0 = time.perf_counter()
                await ticker.tick()
                elapsed += time.perf_counter() - t0
            out[case] = elapsed / (ticks - (case == "lost")) * 1e6
    finally:
        # Only this bench's keys (the URL may be a shared server).
        async for key in redis.scan_iter(match="bench-*", count=1000):
            await redis.delete(key)
        await redis.aclose()
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--redis-url")
    parser.add_argument("--ticks", type=int, default=300)
    args = parser.parse_args()
    with redis_server(args.redis_url) as url:
        for count in (1, 50):
            r = asyncio.run(measure(url, count, args.ticks))
            print(
                f"{count:>2} entries: idle {r['idle']:.0f} µs/tick, "
                f"due+lost {r['lost']:.0f} µs/tick, due+won {r['won']:.0f} µs/tick"
            )


if __name__ == "__main__":
    main()
