"""asyncio against uvloop: the same throughput and latency benchmarks, both ways, interleaved.

Runs ``bench/throughput.py --mode noop``, ``--mode io`` and ``bench/latency.py``
once per round on asyncio and once with ``--uvloop`` (in that order, round
after round), each as its own process with ``--repeat 1 --json``, and keeps
the medians. With ``--uvloop`` both the enqueuing script and the worker
subprocess run on uvloop; ``bench/common.py`` checks that the worker reported
the loop it was asked for (a worker that quietly ran asyncio fails the run).

Interleaving matters on a shared machine: background load drifts, and
alternating the two loops lets that drift fall on both.

    python bench/uvloop_compare.py [--rounds 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Any

import common

BENCHMARKS = [
    ("throughput noop (20,000 jobs, c=50)", ["throughput.py", "--mode", "noop"], "jobs_per_s"),
    ("throughput io (5,000 x 10 ms, c=100)", ["throughput.py", "--mode", "io"], "jobs_per_s"),
    ("latency idle worker, 1 queue, p50", ["latency.py", "--queues", "1"], "p50_ms"),
    ("latency idle worker, 1 queue, p99", ["latency.py", "--queues", "1"], "p99_ms"),
]
UNITS = {"jobs_per_s": "jobs/s", "p50_ms": "ms", "p99_ms": "ms", "cpu_us_per_job": "µs/job"}


def run_script(argv: list[str], use_uvloop: bool) -> dict[str, Any]:
    command = [sys.executable, str(common.BENCH_DIR / argv[0]), *argv[1:], "--repeat", "1"]
    command += ["--json"] + (["--uvloop"] if use_uvloop else [])
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {done.stderr.strip()[-500:]}")
    document: dict[str, Any] = json.loads(done.stdout)
    result: dict[str, Any] = document["results"][0]
    if result["params"].get("loop") != ("uvloop" if use_uvloop else "asyncio"):
        raise RuntimeError(f"{' '.join(argv)} ran on {result['params'].get('loop')}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description="asyncio vs uvloop, interleaved")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="JSON on stdout, table on stderr")
    args = parser.parse_args()
    if common.uvloop_factory(True)[0] is None:
        sys.exit(2)
    load_before = os.getloadavg()[0]
    # (label, metric) -> loop -> values; one script run serves both latency rows.
    values: dict[tuple[str, str], dict[str, list[float]]] = {}
    scripts = {tuple(argv): label for label, argv, _ in BENCHMARKS}
    for round_no in range(1, args.rounds + 1):
        for argv in scripts:
            for use_uvloop in (False, True):
                loop = "uvloop" if use_uvloop else "asyncio"
                result = run_script(list(argv), use_uvloop)
                for label, bench_argv, key in BENCHMARKS:
                    if tuple(bench_argv) != argv:
                        continue
                    per_loop = values.setdefault((label, key), {"asyncio": [], "uvloop": []})
                    per_loop[loop].append(result["metrics"][key]["runs"][0])
                    if key == "jobs_per_s":
                        cpu = values.setdefault(
                            (label.replace("throughput", "worker CPU,"), "cpu_us_per_job"),
                            {"asyncio": [], "uvloop": []},
                        )
                        cpu[loop].append(result["metrics"]["cpu_us_per_job"]["runs"][0])
                shown = ", ".join(
                    f"{k}={result['metrics'][k]['runs'][0]:.4g}"
                    for k in ("jobs_per_s", "p50_ms", "p99_ms", "cpu_us_per_job")
                    if k in result["metrics"]
                )
                common.note(f"  round {round_no} {' '.join(argv)} {loop}: {shown}")
    rows = []
    for (label, key), per_loop in values.items():
        a, u = common.median(per_loop["asyncio"]), common.median(per_loop["uvloop"])
        rows.append({"benchmark": label, "metric": key, "unit": UNITS[key], "asyncio": a,
                     "uvloop": u, "uvloop_over_asyncio": u / a, "runs": per_loop})  # fmt: skip
    load_after = os.getloadavg()[0]
    table = [
        "| Benchmark | asyncio (median) | uvloop (median) | uvloop ÷ asyncio | runs asyncio "
        "| runs uvloop |",
        "|---|---:|---:|---:|---|---|",
    ]
    for row in rows:
        unit = row["unit"]

        def fmt(v: float, unit: str = unit) -> str:
            return common.format_value(v, unit)

        table.append(
            f"| {row['benchmark']} ({unit}) | {fmt(row['asyncio'])} | {fmt(row['uvloop'])} "
            f"| {row['uvloop_over_asyncio']:.2f} "
            f"| {' / '.join(fmt(v) for v in row['runs']['asyncio'])} "
            f"| {' / '.join(fmt(v) for v in row['runs']['uvloop'])} |"
        )
    common.note(f"1-min load average {load_before:.2f} before, {load_after:.2f} after")
    print("\n".join(table), file=sys.stderr if args.json else sys.stdout, flush=True)
    if args.json:
        import uvloop

        document = {
            "machine": common.machine(),
            "uvloop": uvloop.__version__,
            "rounds": args.rounds,
            "loadavg_1m_before": load_before,
            "rows": rows,
        }
        print(json.dumps(document, indent=2), flush=True)


if __name__ == "__main__":
    main()
