"""A wheel built from this tree carries what the package needs (Lua scripts, templates,
static files, py.typed), installs into a clean venv with its ``web`` extra, runs a job,
serves the web UI from its own files and reports its version: the package as a user
gets it."""

from __future__ import annotations

import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from cogworker_async import __version__
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


# The web extra from the installed wheel: templates and static files are found in
# site-packages and pages render (through the ASGI app: no server, no httpx needed).
WEB_SCRIPT = """
import asyncio, importlib.metadata, sys
from pathlib import Path
import cogworker_async, cogworker_async.web
from cogworker_async import Settings
from cogworker_async.web import create_app

package = Path(cogworker_async.web.__file__).parent
assert "site-packages" in str(package), package
assert (package / "templates" / "base.html").is_file()
assert (Path(cogworker_async.__file__).parent / "py.typed").is_file()
assert importlib.metadata.version("cogworker-async") == cogworker_async.__version__

async def get(app, path):
    sent, requested, done = [], [], asyncio.Event()
    async def receive():  # the request once; then, after the response, a disconnect
        if not requested:
            requested.append(True)
            return {"type": "http.request", "body": b"", "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}
    async def send(message):
        sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body"):
            done.set()
    await app({"type": "http", "http_version": "1.1", "method": "GET", "scheme": "http",
               "path": path, "raw_path": path.encode(), "root_path": "", "query_string": b"",
               "headers": [(b"host", b"localhost")], "server": ("localhost", 80),
               "client": ("127.0.0.1", 1)}, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    return status, b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")

async def main():
    app = create_app(Settings(redis_url=sys.argv[1], namespace="wheel"))
    status, css = await get(app, "/static/style.css")
    assert status == 200 and css, (status, css[:100])
    for vendored in ("uPlot.iife.min.js", "uPlot.min.css"):
        status, body = await get(app, "/static/vendor/" + vendored)
        assert status == 200 and len(body) > 1000, (vendored, status, body[:100])
    status, page = await get(app, "/queues")
    assert status == 200 and b"<html" in page.lower(), (status, page[:300])
    print("web ok")

asyncio.run(main())
"""


VENDORED = ("uPlot.iife.min.js", "uPlot.min.css", "uPlot.LICENSE")
"""What ``cogworker_async/web/static/vendor/`` must carry into the wheel."""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One wheel for both tests: building it is the slow part."""
    dist = tmp_path_factory.mktemp("dist")
    build = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(ROOT)],
        capture_output=True,
        text=True,
        check=False,
        timeout=240,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    return next(dist.glob("*.whl"))


@pytest.mark.timeout(300)
def test_wheel_carries_scripts_templates_static_and_py_typed(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA")))
    expected = {"cogworker_async/py.typed", "cogworker_async/_version.py"}
    for folder, inside, pattern in (
        ("lua_scripts", "cogworker_async/lua_scripts", "**/*.lua"),
        ("cogworker_async/web/templates", "cogworker_async/web/templates", "*.html"),
        ("cogworker_async/web/static", "cogworker_async/web/static", "**/*"),
    ):
        files = sorted(f for f in (ROOT / folder).glob(pattern) if f.is_file())
        assert files, folder
        expected |= {f"{inside}/{f.relative_to(ROOT / folder).as_posix()}" for f in files}
    # The charts' library (vendored, not from a CDN) and its licence, by name: a
    # subfolder the package data rules could miss.
    vendor = {f"cogworker_async/web/static/vendor/{name}" for name in VENDORED}
    assert vendor <= expected
    assert expected - names == set()
    text = metadata.decode()
    assert f"\nVersion: {__version__}\n" in text
    assert "\nProvides-Extra: web\n" in text
    twine = Path(sys.executable).parent / "twine"
    if twine.exists():  # the dev extra has it; CI's `make dist` checks the sdist too
        check = subprocess.run(
            [str(twine), "check", "--strict", str(wheel)],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.timeout(420)
def test_wheel_installs_with_web_and_runs_a_job(
    wheel: Path, tmp_path: Path, redis_server: EmbeddedRedis
) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", f"{wheel}[web]"],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert install.returncode == 0, install.stderr[-2000:]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            list(args), capture_output=True, text=True, check=False, timeout=60, cwd=tmp_path
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return done

    (tmp_path / "run.py").write_text(SCRIPT)
    assert "ran 42" in run(str(python), str(tmp_path / "run.py"), redis_server.url).stdout
    version = run(str(env_dir / "bin" / "cogworker-async"), "--version").stdout
    assert version.strip() == f"cogworker-async {__version__}"
    (tmp_path / "web.py").write_text(WEB_SCRIPT)
    assert "web ok" in run(str(python), str(tmp_path / "web.py"), redis_server.url).stdout
