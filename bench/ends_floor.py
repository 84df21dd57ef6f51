"""The floor of a tracked job's end inside Redis: what its keys cost, per job.

Issue 22 §3 asks a job that keeps its result or tracks its status to cost at
most 1.3x a plain one. Whatever the worker does, each such job leaves Redis a
new key with a TTL (the result list, or the status hash): this measures what
that costs, beside the same call writing nothing. Each probe is a bare script
writing 50 jobs' keys a call (as an ack call carries them), 20,000 jobs a
probe and run; Redis's CPU (``INFO cpu``) around each, per job; the probes
alternate within each round, and the median over ``--rounds`` is shown.

- ``nothing``: the call and its 50 arguments, no write (the baseline);
- ``result, two keys``: the list (``RPUSH`` + ``EXPIRE``) and its
  ``result_gone`` marker (``SET EX``), as a kept result was written before;
- ``result, one key``: ``RPUSH`` + ``EXPIRE`` of the one-key shape
  (``includes/acked_ends.lua`` now);
- ``one string key``: ``SET EX`` alone (the cheapest new key with a TTL);
- ``status``: ``HSET`` of a final status's 7 fields + ``EXPIRE``.

    python bench/ends_floor.py [--redis-url URL] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics

import common
from redis import Redis

ENVELOPE = '{"ok":true,"value":null,"gone_for":600}'
PROBES = {
    "nothing": "for i = 1, #ARGV do local k = ARGV[i] end",
    "result, two keys": (
        "for i = 1, #ARGV do local k = 'f:result:' .. ARGV[i]"
        f" redis.pcall('RPUSH', k, '{ENVELOPE}') redis.call('EXPIRE', k, 600)"
        " redis.call('SET', 'f:result_gone:' .. ARGV[i], '1', 'EX', 1200) end"
    ),
    "result, one key": (
        "for i = 1, #ARGV do local k = 'f:result:' .. ARGV[i]"
        f" redis.pcall('RPUSH', k, '{ENVELOPE}') redis.call('EXPIRE', k, 1200) end"
    ),
    "one string key": (
        f"for i = 1, #ARGV do redis.call('SET', 'f:result:' .. ARGV[i], '{ENVELOPE}', 'EX', 1200)"
        " end"
    ),
    "status": (
        "for i = 1, #ARGV do local k = 'f:status:' .. ARGV[i]"
        " redis.call('HSET', k, 'state', 'complete', 'class', 'bench.noop', 'queue', 'default',"
        " 'started_at', '1765141234.123456', 'updated_at', '1765141234.223456',"
        " 'retry_count', '0', 'finished_at', '1765141234.223456')"
        " redis.call('EXPIRE', k, 86400) end"
    ),
}
JOBS, PER_CALL = 20_000, 50


def _cpu(redis: Redis) -> float:
    info = redis.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def probe(redis: Redis, source: str) -> float:
    """Redis CPU µs per job of one probe, on an empty database (every key new)."""
    redis.flushdb()
    sha = redis.script_load(source)
    before = _cpu(redis)
    for call in range(JOBS // PER_CALL):
        jids = [f"{call * PER_CALL + j:024x}" for j in range(PER_CALL)]
        redis.evalsha(sha, 0, *jids)
    return (_cpu(redis) - before) / JOBS * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis-url", help="use this Redis (its db is flushed)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with common.redis_server(args.redis_url) as url:
        redis = Redis.from_url(url)
        runs: dict[str, list[float]] = {name: [] for name in PROBES}
        for _ in range(args.rounds):
            for name, source in PROBES.items():
                runs[name].append(probe(redis, source))
        redis.flushdb()
        redis.close()
    base = statistics.median(runs["nothing"])
    print("| probe | Redis CPU µs/job (median) | over `nothing` | all rounds |")
    print("|---|---:|---:|---|")
    for name, values in runs.items():
        median = statistics.median(values)
        spread = " / ".join(f"{v:.2f}" for v in values)
        print(f"| {name} | {median:.2f} | {median - base:+.2f} | {spread} |")


if __name__ == "__main__":
    main()
