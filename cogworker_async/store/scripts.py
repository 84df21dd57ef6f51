"""Lua scripts: read from ``lua_scripts/`` once, includes expanded, run by SHA.

The files ship inside the wheel (``cogworker_async/lua_scripts``) and sit at the
repository's top level in a source checkout or an editable install; both are
looked for. ``--- @include name`` pulls in ``includes/name.lua`` once (a second
include of the same file is skipped); a missing or cyclic include is a
``ScriptError`` at load, not a Redis error at run time.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import redis as sync_redis
from redis.asyncio import Redis
from redis.exceptions import NoScriptError

from cogworker_async.errors import ScriptError

_INCLUDE = re.compile(r"^--- @include (?P<name>[A-Za-z0-9_]+)\s*$", re.MULTILINE)

EncodableArg = str | bytes | int | float


def scripts_dir() -> Path:
    """Where the ``.lua`` files are: inside the package (wheel) or beside it (checkout)."""
    here = Path(__file__).resolve().parent.parent
    for candidate in (here / "lua_scripts", here.parent / "lua_scripts"):
        if (candidate / "includes").is_dir():
            return candidate
    raise ScriptError(f"lua_scripts/ not found beside {here} (a broken install?)")


def expand(source: str, includes_dir: Path, *, origin: str) -> str:
    """Replace each ``--- @include`` line with that include's (expanded) text."""
    done: set[str] = set()

    def expand_in(text: str, chain: tuple[str, ...]) -> str:
        def replace(match: re.Match[str]) -> str:
            name = match["name"]
            if name in chain:
                cycle = " -> ".join((*chain, name))
                raise ScriptError(f"cyclic include in {origin}: {cycle}")
            if name in done:
                return f"-- ({name} already included)"
            path = includes_dir / f"{name}.lua"
            if not path.is_file():
                raise ScriptError(f"{origin}: include {name!r} not found at {path}")
            done.add(name)
            body = expand_in(path.read_text(encoding="utf-8"), (*chain, name))
            return f"-- begin include {name}\n{body}-- end include {name}"

        return _INCLUDE.sub(replace, text)

    return expand_in(source, (origin,))


@dataclass(frozen=True, slots=True)
class Script:
    """One assembled script; ``run`` uses EVALSHA and falls back to EVAL on NOSCRIPT."""

    name: str
    text: str
    sha: str

    async def run(
        self, redis: Redis, keys: Sequence[str], args: Sequence[EncodableArg] = ()
    ) -> Any:
        try:
            return await redis.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            # Flushed (SCRIPT FLUSH, restart, failover): EVAL sends the text and
            # caches it again, so the next call is back to EVALSHA.
            return await redis.eval(self.text, len(keys), *keys, *args)

    async def run_many(
        self, redis: Redis, calls: Sequence[tuple[Sequence[str], Sequence[EncodableArg]]]
    ) -> list[Any]:
        """Several calls of this script in one pipeline (one round trip), replies in order.

        A call refused with NOSCRIPT did not run: the script is loaded and those
        calls are sent again. Any other error is raised (after the pipeline ran).
        """
        if not calls:
            return []
        replies = await self._pipeline(redis, calls)
        if any(isinstance(r, NoScriptError) for r in replies):
            await redis.script_load(self.text)
            again = [i for i, r in enumerate(replies) if isinstance(r, NoScriptError)]
            for i, reply in zip(
                again, await self._pipeline(redis, [calls[i] for i in again]), strict=True
            ):
                replies[i] = reply
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        return replies

    async def _pipeline(
        self, redis: Redis, calls: Sequence[tuple[Sequence[str], Sequence[EncodableArg]]]
    ) -> list[Any]:
        async with redis.pipeline(transaction=False) as pipe:
            for keys, args in calls:
                pipe.evalsha(self.sha, len(keys), *keys, *args)
            return list(await pipe.execute(raise_on_error=False))

    def run_sync(
        self, redis: sync_redis.Redis, keys: Sequence[str], args: Sequence[EncodableArg] = ()
    ) -> Any:
        """The same, for the heartbeat thread's own blocking client."""
        try:
            return redis.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            return redis.eval(self.text, len(keys), *keys, *args)


def load_script(name: str, directory: Path | None = None) -> Script:
    base = directory or scripts_dir()
    path = base / f"{name}.lua"
    if not path.is_file():
        raise ScriptError(f"script {name!r} not found at {path}")
    text = expand(path.read_text(encoding="utf-8"), base / "includes", origin=name)
    return Script(name, text, hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest())


@cache
def script(name: str) -> Script:
    """The named script, read once per process."""
    return load_script(name)
