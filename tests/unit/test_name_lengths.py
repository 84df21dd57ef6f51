"""Job and queue names are bounded: a huge one is a clear ValueError at declaration or
enqueue, never a payload (and a page) megabytes long."""

from __future__ import annotations

import pytest

from cogworker_async import Client, job
from cogworker_async import settings as rules
from cogworker_async.client.by_name import named
from cogworker_async.settings import Settings

TWO_MILLION = 2_000_000


def test_the_bounds_hold_at_their_edge() -> None:
    check_job_name, check_queue_name = rules.check_job_name, rules.check_queue_name
    MAX_JOB_NAME, MAX_QUEUE_NAME = rules.MAX_JOB_NAME, rules.MAX_QUEUE_NAME
    assert check_job_name("j" * MAX_JOB_NAME) == "j" * MAX_JOB_NAME
    assert check_queue_name("q" * MAX_QUEUE_NAME) == "q" * MAX_QUEUE_NAME
    with pytest.raises(ValueError, match=f"at most {MAX_JOB_NAME} characters"):
        check_job_name("j" * (MAX_JOB_NAME + 1))
    with pytest.raises(ValueError, match=f"at most {MAX_QUEUE_NAME} characters"):
        check_queue_name("q" * (MAX_QUEUE_NAME + 1))
    with pytest.raises(ValueError, match="bad job name"):
        check_job_name("")


def test_the_error_line_stays_a_line() -> None:
    with pytest.raises(ValueError, match="bad job name") as caught:
        rules.check_job_name("x" * TWO_MILLION)
    assert len(str(caught.value)) < 300
    assert "2000000 characters" in str(caught.value)


def test_a_huge_name_is_refused_by_job_and_by_name() -> None:
    with pytest.raises(ValueError, match="bad job name"):
        job(name="x" * TWO_MILLION)(lambda: None)
    with pytest.raises(ValueError, match="bad job name"):
        named("x" * TWO_MILLION)
    with pytest.raises(ValueError, match="bad queue name"):
        job(queue="q" * TWO_MILLION)


@pytest.mark.anyio
async def test_the_client_refuses_a_huge_job_name_before_redis(settings: Settings) -> None:
    async with Client(settings) as client:
        with pytest.raises(ValueError, match="bad job name"):
            await client.enqueue("x" * TWO_MILLION)
        with pytest.raises(ValueError, match="bad job name"):
            await client.enqueue_many("x" * TWO_MILLION, [()])
        with pytest.raises(ValueError, match="bad queue name"):
            await client.enqueue_by_name("ok.name", queue="q" * TWO_MILLION)
