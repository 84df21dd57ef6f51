"""cogworker_async beside arq, SAQ, streaq and taskiq-redis: same jobs, same Redis, one table.

``make bench-peers`` runs ``python bench/peers/run.py --setup --repeat 3``.

Every library runs the same three workloads through the same harness
(``bench/peers/_harness.py``; read its docstring for what is timed): no-op
throughput (20,000 jobs, concurrency 50, one queue), I/O-bound throughput
(5,000 jobs of ``asyncio.sleep(0.01)``, concurrency 100) and pickup latency
(1,000 jobs at 200/s onto an idle worker, concurrency 50). Each library has a
small driver, ``bench/peers/<name>_driver.py``, run by the Python of its own
virtualenv ``bench/.peers/<name>/`` (their Redis client pins conflict: arq
needs redis<6, SAQ redis<8, taskiq-redis redis>=8); cogworker_async runs with
this script's own interpreter. Every driver's docstring says how its library
is configured.

``--setup`` creates each missing virtualenv (``python -m venv`` and ``pip
install`` of the pinned packages below, through pip's configured index). A
peer that fails to install or to run is reported as a failed row with its
error, and the rest go on. Every driver run is killed after ``--run-timeout``
seconds (180) and each library gets at most ``--budget`` seconds (600) in all.

The Redis is a private ``redis-server`` (``EmbeddedRedis``), flushed before
every run; there is deliberately no option to point this at another Redis.
Runs are interleaved (round r: each workload, each library in turn), so
background load on a shared machine falls on every library alike. Logs of
every run go to ``bench/results/peers/``.

Besides the four peers at their recommended settings there is one variant
row, ``arq poll_delay=0.05``: at its defaults arq cannot start more than
``5 x max_jobs`` jobs per 0.5 s poll (see ``arq_driver.py``), so that row
shows what arq does when the poll is not the limit.

    python bench/peers/run.py [--setup] [--repeat 3] [--only arq,saq] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BENCH = HERE.parent
VENVS = BENCH / ".peers"
LOGS = BENCH / "results" / "peers"
WORKLOADS = ("noop", "io", "latency")
SELF = "cogworker_async"


@dataclass
class Library:
    name: str  # the row in the table
    driver: str
    packages: list[str] = field(default_factory=list)  # empty: this interpreter
    extra: list[str] = field(default_factory=list)  # more driver arguments (a variant)
    env: str = ""  # the virtualenv's folder, if not ``name``

    @property
    def venv(self) -> Path:
        return VENVS / (self.env or self.name)

    @property
    def python(self) -> str:
        return str(self.venv / "bin" / "python") if self.packages else sys.executable


# Pinned to the versions measured in BENCHMARKS.md. hiredis goes in wherever the
# client is redis-py, as it does for cogworker_async. SAQ 0.26.4 imports
# typing_extensions without declaring it, hence the extra package.
ARQ = ["arq==0.28.0", "hiredis"]
LIBRARIES = [
    Library(SELF, "cogworker_driver.py"),
    Library("arq", "arq_driver.py", ARQ),
    # arq's throughput at its defaults is its poll cap (see arq_driver.py): show it unbound.
    Library("arq poll_delay=0.05", "arq_driver.py", ARQ, ["--set", "poll_delay=0.05"], "arq"),
    Library("saq", "saq_driver.py", ["saq[redis,hiredis]==0.26.4", "typing_extensions"]),
    Library("streaq", "streaq_driver.py", ["streaq==7.2.0"]),
    Library("taskiq", "taskiq_driver.py", ["taskiq-redis==1.2.4", "taskiq==0.13.0", "hiredis"]),
]


def note(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- virtualenvs --------------------------------------------------------------------


def setup(library: Library, timeout: float) -> str | None:
    """Create the library's virtualenv if missing or stale; returns an error or None."""
    stamp = library.venv / ".installed"
    wanted = "\n".join(library.packages)
    if stamp.exists() and stamp.read_text() == wanted:
        return None
    packages = " ".join(library.packages)
    note(f"setup {library.name}: python -m venv {library.venv}; pip install {packages}")
    shutil.rmtree(library.venv, ignore_errors=True)
    LOGS.mkdir(parents=True, exist_ok=True)
    log = LOGS / f"setup-{library.name}.log"
    steps = [
        [sys.executable, "-m", "venv", str(library.venv)],
        [library.python, "-m", "pip", "install", "--quiet", *library.packages],
    ]
    with log.open("w") as out:
        for step in steps:
            try:
                done = subprocess.run(step, stdout=out, stderr=out, timeout=timeout, check=False)
            except subprocess.TimeoutExpired:
                return f"{' '.join(step[:4])} ... did not finish in {timeout:.0f} s"
            if done.returncode != 0:
                return f"{' '.join(step[:4])} ... exited {done.returncode}: {_tail(log)}"
    stamp.write_text(wanted)
    return None


def _tail(path: Path, lines: int = 1) -> str:
    try:
        text = [x for x in path.read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return ""
    return " | ".join(text[-lines:])[-300:]


# --- runs ------------------------------------------------------------------------------


@contextlib.contextmanager
def redis_server() -> Iterator[str]:
    """A private, throwaway redis-server: every run FLUSHALLs it, so never a shared one."""
    from cogworker_async.embedded import EmbeddedRedis

    with EmbeddedRedis() as server:
        note(f"private redis-server at {server.url}")
        yield server.url


def flush(url: str) -> None:
    import redis

    client = redis.Redis.from_url(url)
    try:
        client.flushall()
    finally:
        client.close()


def run_driver(
    library: Library, workload: str, url: str, timeout: float, round_no: int
) -> dict[str, Any]:
    """One driver invocation: its JSON report, or {"ok": False, "error": ...}."""
    LOGS.mkdir(parents=True, exist_ok=True)
    log = LOGS / f"{library.name.replace(' ', '_')}-{workload}-{round_no}.log"
    argv = [library.python, str(HERE / library.driver), "--redis-url", url, "--workload", workload]
    argv += library.extra
    argv += ["--timeout", str(max(10.0, timeout - 30))]
    began = time.perf_counter()
    with log.open("w") as err:
        try:
            done = subprocess.run(
                argv, stdout=subprocess.PIPE, stderr=err, timeout=timeout, check=False, cwd=HERE
            )
        except subprocess.TimeoutExpired:
            return {"ok": False, "error": f"killed after {timeout:.0f} s", "elapsed_s": timeout}
        except OSError as exc:
            return {"ok": False, "error": f"cannot start {argv[0]}: {exc}"}
    elapsed = time.perf_counter() - began
    lines = [x for x in done.stdout.decode(errors="replace").splitlines() if x.startswith("{")]
    if not lines:
        return {
            "ok": False,
            "error": f"exited {done.returncode} without a report: {_tail(log)}",
            "elapsed_s": elapsed,
        }
    report: dict[str, Any] = json.loads(lines[-1])
    report["elapsed_s"] = elapsed
    return report


def measure(args: argparse.Namespace, libraries: list[Library]) -> dict[str, Any]:
    results: dict[str, dict[str, list[dict[str, Any]]]] = {
        lib.name: {w: [] for w in WORKLOADS} for lib in libraries
    }
    failures: dict[str, str] = {}
    spent = dict.fromkeys((lib.name for lib in libraries), 0.0)
    if args.setup:
        errors: dict[Path, str | None] = {}
        for lib in libraries:
            if lib.packages:
                if lib.venv not in errors:
                    errors[lib.venv] = setup(lib, args.install_timeout)
                if errors[lib.venv]:
                    failures[lib.name] = f"install failed: {errors[lib.venv]}"
                    note(f"  {lib.name}: {failures[lib.name]}")
    for lib in libraries:
        if lib.name not in failures and not Path(lib.python).exists():
            failures[lib.name] = f"no virtualenv at {lib.venv} (run with --setup)"
    with redis_server() as url:
        for round_no in range(1, args.repeat + 1):
            for workload in WORKLOADS:
                for lib in libraries:
                    if lib.name in failures:
                        continue
                    left = args.budget - spent[lib.name]
                    if left < 15:
                        results[lib.name][workload].append(
                            {"ok": False, "error": f"skipped: {args.budget:.0f} s budget spent"}
                        )
                        continue
                    flush(url)
                    report = run_driver(lib, workload, url, min(args.run_timeout, left), round_no)
                    spent[lib.name] += report.get("elapsed_s", 0.0)
                    results[lib.name][workload].append(report)
                    note(f"  round {round_no} {workload:<7} {lib.name:<20} {_summary(report)}")
    return {"results": results, "failures": failures, "spent_s": spent}


def _summary(report: dict[str, Any]) -> str:
    if not report.get("ok"):
        return f"FAILED: {report.get('error')}"
    if "jobs_per_s" in report:
        return f"{report['jobs_per_s']:,.0f} jobs/s, {report['cpu_us_per_job']:,.0f} µs CPU/job"
    return f"p50 {report['p50_ms']:.2f} ms, p99 {report['p99_ms']:.2f} ms"


# --- the table -----------------------------------------------------------------------------


def _median(runs: list[dict[str, Any]], key: str) -> float:
    values = [r[key] for r in runs if r.get("ok") and key in r]
    return float(statistics.median(values)) if values else math.nan


def summarize(measured: dict[str, Any], libraries: list[Library]) -> dict[str, Any]:
    rows: dict[str, dict[str, Any]] = {}
    for lib in libraries:
        runs = measured["results"][lib.name]
        row: dict[str, Any] = {
            "noop": _median(runs["noop"], "jobs_per_s"),
            "noop_cpu": _median(runs["noop"], "cpu_us_per_job"),
            "io": _median(runs["io"], "jobs_per_s"),
            "io_cpu": _median(runs["io"], "cpu_us_per_job"),
            "p50": _median(runs["latency"], "p50_ms"),
            "p99": _median(runs["latency"], "p99_ms"),
            "runs": {w: len([r for r in runs[w] if r.get("ok")]) for w in WORKLOADS},
            "errors": sorted(
                {str(r.get("error")) for w in WORKLOADS for r in runs[w] if not r.get("ok")}
            ),
        }
        if lib.name in measured["failures"]:
            row["errors"] = [measured["failures"][lib.name]]
        ok = next((r for w in WORKLOADS for r in runs[w] if r.get("ok")), None)
        row["versions"] = (ok or {}).get("versions", {})
        row["settings"] = (ok or {}).get("settings", {})
        rows[lib.name] = row
    peers = [lib.name for lib in libraries if lib.name != SELF]
    best: dict[str, float] = {}
    for key, better in (("noop", max), ("io", max), ("p50", min), ("p99", min)):
        values = [rows[p][key] for p in peers if not math.isnan(rows[p][key])]
        best[key] = better(values) if values else math.nan
    for row in rows.values():
        for key in ("noop", "io", "p50", "p99"):
            row[f"{key}_vs_best_peer"] = row[key] / best[key] if best[key] else math.nan
    return {"rows": rows, "best_peer": best}


def _num(value: float, digits: int = 0) -> str:
    return "n/a" if math.isnan(value) else f"{value:,.{digits}f}"


def _ratio(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.2f}×"


def markdown(summary: dict[str, Any]) -> str:
    out = [
        "| Library | no-op jobs/s | × best peer | no-op CPU µs/job | I/O jobs/s | × best peer "
        "| pickup p50 ms | p99 ms | p50 ÷ best peer's |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, row in summary["rows"].items():
        if all(math.isnan(row[k]) for k in ("noop", "io", "p50")):
            out.append(f"| {name} | failed: {'; '.join(row['errors'])[:300]} |||||||||")
            continue
        out.append(
            f"| {name} | {_num(row['noop'])} | {_ratio(row['noop_vs_best_peer'])} "
            f"| {_num(row['noop_cpu'])} | {_num(row['io'])} | {_ratio(row['io_vs_best_peer'])} "
            f"| {_num(row['p50'], 2)} | {_num(row['p99'], 2)} | {_ratio(row['p50_vs_best_peer'])} |"
        )
    notes = [
        f"- {name}: {'; '.join(row['errors'])[:400]}"
        for name, row in summary["rows"].items()
        if row["errors"]
    ]
    if notes:
        out += ["", "Failed or skipped runs:", *notes]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setup", action="store_true", help="create missing peer virtualenvs")
    parser.add_argument("--repeat", type=int, default=1, help="runs per library and workload")
    parser.add_argument(
        "--only", help="comma-separated rows to run, e.g. arq,saq (cogworker_async always runs)"
    )
    parser.add_argument("--run-timeout", type=float, default=180.0, help="seconds per driver run")
    parser.add_argument("--budget", type=float, default=600.0, help="seconds per library")
    parser.add_argument("--install-timeout", type=float, default=600.0)
    parser.add_argument("--json", action="store_true", help="JSON on stdout, table on stderr")
    args = parser.parse_args()
    libraries = LIBRARIES
    if args.only:
        wanted = {SELF, *args.only.split(",")}
        libraries = [lib for lib in LIBRARIES if lib.name in wanted]
    load_before = os.getloadavg()
    started = time.perf_counter()
    measured = measure(args, libraries)
    summary = summarize(measured, libraries)
    load_after = os.getloadavg()
    elapsed = time.perf_counter() - started
    table = markdown(summary)
    note(
        f"peers: {elapsed:.0f} s, --repeat {args.repeat}, load average (1/5/15 min) "
        f"{'/'.join(f'{x:.2f}' for x in load_before)} before, "
        f"{'/'.join(f'{x:.2f}' for x in load_after)} after"
    )
    print(table, file=sys.stderr if args.json else sys.stdout, flush=True)
    if args.json:
        document = {
            "repeat": args.repeat,
            "elapsed_s": elapsed,
            "loadavg_before": load_before,
            "loadavg_after": load_after,
            "nproc": os.cpu_count(),
            **summary,
            "runs": measured["results"],
            "failures": measured["failures"],
        }
        print(json.dumps(document, indent=2, default=str), flush=True)


if __name__ == "__main__":
    main()
