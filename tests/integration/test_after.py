"""after=[...] end to end: a worker runs the prerequisites, the dependent runs once
they all succeeded, and each edge's policy decides what a failure does.

A plain (untracked) prerequisite that succeeds releases its dependent, which
runs once; one that dies ends it (fail, the default), drops it, or lets it run
(run); a prerequisite that ended before the dependent was enqueued is judged
from its status or kept result; a chain of afters runs in order; a waiting
job's status says what it waits on, and an abort takes it off.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from cogworker_async import Client, JobFunction, PrerequisiteUnknown, Settings, Worker, job
from cogworker_async.client.aborting import AbortOutcome
from cogworker_async.errors import JobFailed
from tests.helpers import wait_for
from tests.integration.test_cli import cli

pytestmark = pytest.mark.anyio

ran: list[str] = []


@job(name="af.work")
async def work(tag: str) -> str:
    ran.append(tag)
    return tag


@job(name="af.dies", retry=0)
async def dies(tag: str) -> None:
    ran.append(tag)
    raise RuntimeError("no luck")


ALL: list[JobFunction[Any, Any]] = [work, dies]


@pytest.fixture(autouse=True)
def _fresh() -> None:
    ran.clear()


async def _ran(*tags: str) -> bool:
    return all(tag in ran for tag in tags)


async def test_a_job_runs_once_after_its_plain_prerequisites_succeeded(
    settings: Settings,
) -> None:
    async with Client(settings) as client:
        first = await client.enqueue(work, "first")
        second = await client.enqueue(work, "second")
        assert first is not None
        assert second is not None
        report = await client.enqueue(work.options(after=[first, second], keep_result=60), "report")
        assert report is not None
        status = await client.status(report)
        assert status is not None
        assert status["state"] == "waiting"
        assert sorted(status["waiting_on"]) == sorted([first, second])
        async with Worker(settings, jobs=ALL):
            assert await report.result(timeout=30) == "report"
        assert ran.count("report") == 1
        assert ran.index("report") > max(ran.index("first"), ran.index("second"))


@pytest.mark.parametrize("policy", ["fail", "drop", "run"])
async def test_a_dead_prerequisite_ends_fails_or_runs_its_dependent(
    settings: Settings, policy: str
) -> None:
    async with Client(settings) as client:
        pre = await client.enqueue(dies, "pre")
        assert pre is not None
        dep = await client.enqueue(
            work.options(after=[pre], if_failed=policy, keep_result=60),  # type: ignore[arg-type]
            "dep",
        )
        assert dep is not None
        async with Worker(settings, jobs=ALL):
            if policy == "run":
                assert await dep.result(timeout=30) == "dep"
            else:
                with pytest.raises(JobFailed) as failed:
                    await dep.result(timeout=30)
                expected = "DependencyFailed" if policy == "fail" else "DependencyDropped"
                assert failed.value.error_class == expected
                assert pre in failed.value.error_message
        assert ran.count("dep") == (1 if policy == "run" else 0)


async def test_a_prerequisite_that_already_ended_is_judged_at_once(settings: Settings) -> None:
    async with Client(settings) as client:
        async with Worker(settings, jobs=ALL):
            done = await client.enqueue(work.options(keep_result=60), "done")
            assert done is not None
            assert await done.result(timeout=30) == "done"
            failed = await client.enqueue(dies.options(status=True), "failed")
            assert failed is not None
            await wait_for(lambda: _ran("failed"), timeout=30)

            async def failed_ended() -> bool:
                status = await client.status(failed)
                return status is not None and status["state"] == "dead"

            await wait_for(failed_ended, timeout=30)
            runs = await client.enqueue(work.options(after=[done], keep_result=60), "runs")
            assert runs is not None
            assert await runs.result(timeout=30) == "runs"
            ends = await client.enqueue(work.options(after=[done, failed], keep_result=60), "x")
            assert ends is not None
            with pytest.raises(JobFailed, match="DependencyFailed"):
                await ends.result(timeout=5)
            # A jid nothing in Redis tells of: refused, nothing enqueued.
            with pytest.raises(PrerequisiteUnknown):
                await client.enqueue(work.options(after=["0" * 24]), "never")
        assert "x" not in ran


async def test_a_chain_of_afters_runs_in_order(settings: Settings) -> None:
    async with Client(settings) as client:
        handles = [await client.enqueue(work, "c0")]
        for i in range(1, 4):
            before = handles[-1]
            assert before is not None
            handles.append(await client.enqueue(work.options(after=[before]), f"c{i}"))
        async with Worker(settings, jobs=ALL):
            await wait_for(lambda: _ran("c3"), timeout=30)
        assert [tag for tag in ran if tag.startswith("c")] == ["c0", "c1", "c2", "c3"]


async def test_aborting_a_waiting_job_removes_it(settings: Settings) -> None:
    async with Client(settings) as client:
        pre = await client.enqueue(work, "pre")
        assert pre is not None
        dep = await client.enqueue(work.options(after=[pre], status=True), "dep")
        assert dep is not None
        assert await client.abort(dep) is AbortOutcome.REMOVED
        status = await client.status(dep)
        assert status is not None
        assert status["state"] == "aborted"
        async with Worker(settings, jobs=ALL):
            await wait_for(lambda: _ran("pre"), timeout=30)
            assert await client.abort(dep) is AbortOutcome.FINISHED
        assert "dep" not in ran


async def test_mistakes_are_refused_before_anything_is_written(settings: Settings) -> None:
    async with Client(settings) as client:
        with pytest.raises(ValueError, match="delay"):
            await client.enqueue(work.options(after=["a"], delay=5), "x")
        with pytest.raises(ValueError, match="if_failed"):
            await client.enqueue(work.options(after=["a"], if_failed="later"), "x")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="list of jids"):
            await client.enqueue(work.options(after="abc"), "x")
        with pytest.raises(ValueError, match="enqueue_many"):
            await client.enqueue_many(work.options(after=["a"]), [("x",)])
        async with client.batch() as b:
            with pytest.raises(ValueError, match="batch member"):
                await b.enqueue(work.options(after=["a"]), "x")


async def test_the_cli_shows_a_waiting_job(settings: Settings) -> None:
    async with Client(settings) as client:
        pre = await client.enqueue(work, "pre")
        assert pre is not None
        dep = await client.enqueue(work.options(after=[pre]), "dep")
        assert dep is not None
    status = await anyio.to_thread.run_sync(lambda: cli(settings, "status", dep))
    assert status.returncode == 0, status.stderr
    assert "waiting" in status.stdout
    assert f"waiting_on     {pre}" in status.stdout
    assert "place          after" in status.stdout
    listed = await anyio.to_thread.run_sync(lambda: cli(settings, "waiting", "--json"))
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == [
        {"jid": dep, "class": "af.work", "queue": "default", "waiting_on": [pre]}
    ]
