"""A wheel built from this tree, installed into a clean venv, runs a job (Lua files inside)."""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

import pytest

from cogworker_async.embedded import EmbeddedRedis

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import asyncio, sys
from cogworker_async import Client, Settings, Worker, job
from cogworker_async.store.scripts import scripts_dir

done = []

@job(name="wheel.hello")
async def hello(x):
    done.append(x)

async def main():
    settings = Settings(redis_url=sys.argv[1], namespace="wheel")
    async with Client(settings) as client:
        await client.enqueue(hello, 42)
    async with Worker(settings, jobs=[hello]):
        for _ in range(500):
            if done:
                break
            await asyncio.sleep(0.01)
    assert done == [42], done
    assert "site-packages" in str(scripts_dir()), scripts_dir()
    print("ran", done[0], "with scripts from", scripts_dir())

asyncio.run(main())
"""


@pytest.mark.timeout(300)
def test_wheel_installs_and_runs_a_job(tmp_path: Path, redis_server: EmbeddedRedis) -> None:
    dist = tmp_path / "dist"
    build = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(ROOT)],
        capture_output=True,
        text=True,
        check=False,
        timeout=240,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    wheel = next(dist.glob("*.whl"))
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", str(wheel)],
        capture_output=True,
        text=True,
        check=False,
        timeout=240,
    )
    assert install.returncode == 0, install.stderr[-2000:]
    (tmp_path / "run.py").write_text(SCRIPT)
    ran = subprocess.run(
        [str(python), str(tmp_path / "run.py"), redis_server.url],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        cwd=tmp_path,
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "ran 42" in ran.stdout
