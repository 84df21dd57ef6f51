"""Every code block of README.md and docs/ runs, or says why it can't.

* ``python`` blocks run against the test's redis-server, in order, one namespace
  per page (a later block may use what an earlier one defined, as a reader
  does), with ``COGWORKER_REDIS_URL``/``COGWORKER_NAMESPACE`` pointing at the
  test's server (so ``Settings()`` and ``Client()`` find it) and ``settings``
  and ``redis`` (a ``redis.asyncio.Redis``) defined, as the pages say. A block
  may use top-level ``await`` and ``async with``.
* A block that can't run here (a fragment of a larger app, a placeholder
  connection string) is preceded by ``<!-- docs-test: skip: REASON -->``; the
  reason is required.
* ``sh`` blocks: every ``cogworker-async`` command line names a real command
  and real options of it (checked against the typer app, so the docs can't
  drift from the CLI), every ``make`` target exists, every ``pip install``
  extra is declared in pyproject.toml.
"""

from __future__ import annotations

import ast
import asyncio
import re
import shlex
import tomllib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer.main
from redis.asyncio import Redis

from cogworker_async import Client, Settings
from cogworker_async.cli import app
from cogworker_async.embedded import EmbeddedRedis

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w-]*)\s*$")
SKIP = re.compile(r"<!--\s*docs-test:\s*skip:\s*(?P<reason>[^>]*?)\s*-->")
BLOCK_TIMEOUT = 60.0


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    skip_reason: str | None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks_of(page: Path) -> list[Block]:
    lines = page.read_text().splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        indent = len(opening["indent"])
        body: list[str] = []
        end = index + 1
        while end < len(lines) and lines[end].strip() != "```":
            body.append(lines[end][indent:])
            end += 1
        previous = next((line for line in reversed(lines[:index]) if line.strip()), "")
        skip = SKIP.search(previous)
        found.append(
            Block(
                page,
                index + 1,
                opening["lang"],
                "\n".join(body) + "\n",
                skip["reason"] if skip else None,
            )
        )
        index = end + 1
    return found


def python_pages() -> Iterator[Any]:
    for page in PAGES:
        blocks = [b for b in blocks_of(page) if b.lang == "python"]
        if blocks:
            yield pytest.param(page, id=str(page.relative_to(ROOT)))


def test_the_pages_have_code_blocks() -> None:
    """The parser finds the blocks (a broken fence regex would pass everything)."""
    langs = {block.lang for page in PAGES for block in blocks_of(page)}
    assert {"python", "sh"} <= langs
    readme = [b for b in blocks_of(ROOT / "README.md") if b.lang == "python"]
    assert readme, "the README's 60-second example is a python block"
    assert all(b.skip_reason is None for b in readme), "the README's examples all run"


def test_every_skip_gives_a_reason() -> None:
    for page in PAGES:
        text = page.read_text()
        for marker in re.finditer(r"<!--\s*docs-test:[^>]*-->", text):
            assert SKIP.fullmatch(marker.group()), f"{page}: malformed marker {marker.group()!r}"
            assert SKIP.fullmatch(marker.group())["reason"], f"{page}: a skip needs a reason"  # type: ignore[index]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("page", list(python_pages()))
def test_python_blocks_run(
    page: Path, redis_server: EmbeddedRedis, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    namespace = f"docs-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("COGWORKER_REDIS_URL", redis_server.url)
    monkeypatch.setenv("COGWORKER_NAMESPACE", namespace)
    monkeypatch.chdir(tmp_path)  # no stray .env is read, nothing is written into the tree
    module_name = "docs_" + re.sub(r"\W", "_", str(page.relative_to(ROOT).with_suffix("")))
    scope: dict[str, Any] = {"__name__": module_name, "settings": Settings()}
    with asyncio.Runner() as runner:
        scope["redis"] = Redis.from_url(redis_server.url)
        try:
            for block in blocks_of(page):
                if block.lang != "python" or block.skip_reason is not None:
                    continue
                run_block(runner, block, scope)
        finally:
            for value in list(scope.values()):
                if isinstance(value, Client):  # an example's client, left open as in an app
                    runner.run(value.close())
            runner.run(scope["redis"].aclose())


def run_block(runner: asyncio.Runner, block: Block, scope: dict[str, Any]) -> None:
    try:
        code = compile(block.code, block.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    except SyntaxError as error:
        pytest.fail(f"{block.where}: does not parse: {error}")
    try:
        result = eval(code, scope)  # the docs' own examples: running them is the point
        if asyncio.iscoroutine(result):
            runner.run(asyncio.wait_for(result, BLOCK_TIMEOUT))
    except Exception as error:
        raise AssertionError(f"{block.where}: the example raised {error!r}") from error


# -- shell blocks ------------------------------------------------------------------


def shell_commands() -> Iterator[Any]:
    for page in PAGES:
        for block in blocks_of(page):
            if block.lang not in {"sh", "bash", "console"} or block.skip_reason is not None:
                continue
            for offset, raw in enumerate(block.code.splitlines(), start=1):
                line = raw.split(" #", 1)[0].strip()
                if line.startswith("#") or not line:
                    continue
                for segment in re.split(r"&&|\|\s+(?=cogworker-async)", line):
                    yield f"{block.where}+{offset}", segment.strip()


COMMANDS = list(shell_commands())


def test_shell_blocks_were_found() -> None:
    assert any(command.startswith("cogworker-async ") for _, command in COMMANDS)
    assert any(command.startswith("make ") for _, command in COMMANDS)


@pytest.mark.parametrize(("where", "command"), COMMANDS, ids=[w for w, _ in COMMANDS])
def test_shell_command_exists(where: str, command: str) -> None:
    words = shlex.split(command.replace("[", " ").replace("]", " ").replace("|", " "))
    if words[0] == "cogworker-async":
        check_cli(where, words[1:])
    elif words[0] == "make":
        targets = set(re.findall(r"^([\w.-]+):", (ROOT / "Makefile").read_text(), re.M))
        for target in (w for w in words[1:] if "=" not in w):
            assert target in targets, f"{where}: no make target {target!r}"
    elif words[:2] == ["pip", "install"]:
        pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
        declared = set(pyproject["project"]["optional-dependencies"])
        for extras in re.findall(r"cogworker-async\[([\w,]+)\]", command):
            missing = set(extras.split(",")) - declared
            assert not missing, f"{where}: pyproject declares no extra {missing}"


def check_cli(where: str, words: list[str]) -> None:
    command: Any = typer.main.get_command(app)
    if words == ["--version"]:
        return
    path = ["cogworker-async"]
    while hasattr(command, "commands"):
        assert words, f"{where}: {' '.join(path)} needs a subcommand"
        name, words = words[0], words[1:]
        assert name in command.commands, f"{where}: {' '.join(path)} has no command {name!r}"
        command = command.commands[name]
        path.append(name)
    known = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}
    known.add("--help")
    for word in words:
        if word.startswith("-") and not re.fullmatch(r"-?[\d.]+", word):
            option = word.split("=", 1)[0]
            assert option in known, f"{where}: {' '.join(path)} has no option {option!r}"


def test_readme_fits_on_a_screen() -> None:
    """What it is, install, a 60-second example, the two commands, links: the rest is in docs/."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.encode()) <= 8_000, "the README grew: move the detail into docs/"
    assert "pip install cogworker-async" in readme
    for command in ("make demo", "make test"):
        assert command in readme, f"the README must name {command!r} (CI and users run it)"
    for link in re.findall(r"\]\(([^)#]+)", readme):
        if "://" not in link:
            assert (ROOT / link).exists(), f"README links to {link}, which does not exist"
