"""middleware.wrap_server_chain: the server middleware chain around a run."""

from __future__ import annotations

import pytest

from cogworker_async.middleware import JobDict, Next, ServerMiddleware, wrap_server_chain

pytestmark = pytest.mark.anyio


def _recording(name: str, seen: list[str]) -> ServerMiddleware:
    async def middleware(job: JobDict, call_next: Next) -> None:
        seen.append(f"{name} before {job['jid']}")
        await call_next()
        seen.append(f"{name} after")

    return middleware


async def test_the_first_middleware_is_outermost_and_the_run_innermost() -> None:
    seen: list[str] = []

    async def run() -> None:
        seen.append("run")

    chain = [_recording("a", seen), _recording("b", seen)]
    await wrap_server_chain(chain, {"jid": "j1"}, run)()
    assert seen == ["a before j1", "b before j1", "run", "b after", "a after"]


async def test_a_chain_built_for_one_job_is_its_own() -> None:
    # Built per run: a chain holds its job, never the one of the run before.
    seen: list[str] = []

    async def run() -> None:
        seen.append("run")

    chain = [_recording("a", seen)]
    first = wrap_server_chain(chain, {"jid": "j1"}, run)
    second = wrap_server_chain(chain, {"jid": "j2"}, run)
    await second()
    await first()
    assert seen == ["a before j2", "run", "a after", "a before j1", "run", "a after"]


async def test_a_middleware_that_does_not_call_next_skips_the_run() -> None:
    ran: list[str] = []

    async def skip(job: JobDict, call_next: Next) -> None:
        return None

    async def run() -> None:
        ran.append("run")

    await wrap_server_chain([skip], {"jid": "j"}, run)()
    assert ran == []


async def test_the_runs_failure_goes_out_through_every_layer() -> None:
    seen: list[str] = []

    async def run() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        await wrap_server_chain([_recording("a", seen)], {"jid": "j"}, run)()
    assert seen == ["a before j"]


async def test_no_middleware_is_the_run_itself() -> None:
    async def run() -> None:
        return None

    assert wrap_server_chain([], {"jid": "j"}, run) is run
