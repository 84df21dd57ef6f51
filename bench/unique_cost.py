"""What a unique job costs against a plain one: the no-op throughput workload run
plain and with ``unique="until_executed"``, alternating, in one process.

A unique job pays one ``enqueue_unique.lua`` call at enqueue (lock + push, not
batched with other jobs the way plain pushes are) and one owner-checked release
after it ran; a plain job pays nothing for the feature.

    python bench/unique_cost.py [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse

import common
import throughput


async def bench(url: str, repeat: int) -> list[common.Result]:
    results: dict[str, list[common.Result]] = {"noop": [], "unique": []}
    for _ in range(repeat):
        for mode in ("noop", "unique"):  # alternating: both see the same machine
            results[mode].append(await throughput.bench(url, mode, repeat=1))
    return [merged for runs in results.values() for merged in runs]


def main() -> None:
    parser = argparse.ArgumentParser(description="cogworker_async: unique vs plain job cost")
    common.add_common_args(parser)
    args = parser.parse_args()
    with common.redis_server(args.redis_url) as url:
        results = common.run_async(bench(url, args.repeat))
    common.emit(results, as_json=args.json)


if __name__ == "__main__":
    main()
