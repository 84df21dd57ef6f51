"""`@job`, per-enqueue options, and the worker's name → handler registry."""

from __future__ import annotations

import importlib
import re
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cogworker_async.errors import ConfigurationError
from cogworker_async.jobs import BoundJob, JobFunction, JobOptions, JobRegistry, job


@job
async def bare(x: int) -> int:
    """Doc of bare."""
    return x + 1


@job(name="emails.send", queue="mail", retry=5, timeout=30)
async def send_email(to: str, subject: str) -> str:
    return f"{to}:{subject}"


@job()
def plain(x: int) -> int:
    return x * 2


class Holder:
    @staticmethod
    def method() -> None:
        return None


nested = job(Holder.method)


def test_bare_decorator_defaults() -> None:
    assert isinstance(bare, JobFunction)
    assert bare.name == f"{__name__}.bare"
    assert bare.defaults == JobOptions(queue="default", retry=None, timeout=None)
    assert bare.is_async
    assert bare.__doc__ == "Doc of bare."
    assert bare.__wrapped__ is bare.fn


def test_default_name_uses_qualname() -> None:
    assert nested.name == f"{__name__}.Holder.method"


def test_decorator_with_options() -> None:
    assert send_email.name == "emails.send"
    assert send_email.defaults.queue == "mail"
    assert send_email.defaults.retry == 5
    assert send_email.defaults.timeout == 30
    assert "emails.send" in repr(send_email)
    assert "mail" in repr(send_email)


def test_empty_parentheses_and_plain_def() -> None:
    assert plain.name == f"{__name__}.plain"
    assert not plain.is_async
    assert plain(4) == 8


@pytest.mark.anyio
async def test_job_function_is_still_callable(anyio_backend: str) -> None:
    assert await bare(1) == 2
    assert await send_email("a", "b") == "a:b"


def test_options_merge_with_defaults() -> None:
    bound = send_email.options(delay=30)
    assert isinstance(bound, BoundJob)
    assert bound.function is send_email
    assert bound.name == "emails.send"
    assert bound.options == JobOptions(queue="mail", retry=5, timeout=30, delay=30, at=None)


def test_options_override() -> None:
    bound = send_email.options(queue="urgent", retry=False, timeout=2.5, at=1234.0)
    assert bound.options == JobOptions(queue="urgent", retry=False, timeout=2.5, at=1234.0)
    # The job's own defaults are untouched.
    assert send_email.defaults.queue == "mail"
    assert send_email.defaults.retry == 5


def test_options_retry_zero_is_kept() -> None:
    assert send_email.options(retry=0).options.retry == 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"delay": 5, "at": 10.0}, "delay or at"),
        ({"delay": -1}, "delay must be a finite number of seconds, 0 or more"),
        ({"timeout": 0}, "timeout must be a finite number of seconds, above 0"),
        ({"timeout": -3}, "timeout must be a finite number of seconds, above 0"),
    ],
)
def test_options_validation(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        bare.options(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("timeout", [0, -1])
def test_decorator_rejects_bad_timeout(timeout: float) -> None:
    with pytest.raises(ValueError, match="timeout must be a finite number of seconds, above 0"):
        job(timeout=timeout)


MakeModule = Callable[[str], str]


@pytest.fixture
def make_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MakeModule]:
    """Writes an importable module with the given body; forgets it after the test."""
    monkeypatch.syspath_prepend(str(tmp_path))
    names: list[str] = []

    def make(body: str) -> str:
        name = f"cw_test_jobs_{uuid.uuid4().hex[:10]}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(body), encoding="utf-8")
        names.append(name)
        importlib.invalidate_caches()
        return name

    yield make
    for name in names:
        sys.modules.pop(name, None)


def test_registry_from_module_name(make_module: MakeModule) -> None:
    name = make_module(
        """
        from cogworker_async import job

        @job
        async def first() -> None: ...

        @job(name="custom.second")
        def second() -> None: ...

        def not_a_job() -> None: ...
        """,
    )
    registry = JobRegistry([name])
    assert registry.names == sorted([f"{name}.first", "custom.second"])
    assert len(registry) == 2
    found = registry.get("custom.second")
    assert found is not None
    assert found.fn.__name__ == "second"
    assert registry.get(f"{name}.not_a_job") is None


def test_registry_mixes_functions_and_modules(make_module: MakeModule) -> None:
    name = make_module(
        """
        from cogworker_async import job

        @job
        async def only() -> None: ...
        """,
    )
    registry = JobRegistry([send_email, name, bare])
    assert registry.names == sorted(["emails.send", f"{name}.only", bare.name])
    assert registry.get("emails.send") is send_email


def test_module_without_jobs_is_configuration_error(make_module: MakeModule) -> None:
    name = make_module("def helper() -> None: ...\n")
    with pytest.raises(ConfigurationError, match=f"{name}.*no @job"):
        JobRegistry([name])


def test_missing_module_is_configuration_error() -> None:
    missing = f"cw_no_such_module_{uuid.uuid4().hex[:8]}"
    with pytest.raises(ConfigurationError, match=f"cannot import job module '{missing}'"):
        JobRegistry([missing])


def test_module_failing_import_is_configuration_error(make_module: MakeModule) -> None:
    name = make_module("import cw_definitely_not_installed_xyz\n")
    with pytest.raises(ConfigurationError, match=name):
        JobRegistry([name])


def test_two_handlers_with_one_name_rejected() -> None:
    async def other() -> None: ...

    clash = job(name="emails.send")(other)
    with pytest.raises(ConfigurationError, match=re.escape("'emails.send'")):
        JobRegistry([send_email, clash])


def test_same_handler_twice_is_fine() -> None:
    again = job(name="emails.send")(send_email.fn)
    registry = JobRegistry([send_email, again])
    assert len(registry) == 1


def test_registry_rejects_other_things() -> None:
    with pytest.raises(TypeError, match="module name"):
        JobRegistry([42])  # type: ignore[list-item]


def test_unknown_name_is_none() -> None:
    assert JobRegistry([bare]).get("nope") is None


def test_worker_takes_modules_module_names_and_functions(make_module: MakeModule) -> None:
    from cogworker_async import Settings, Worker

    by_object = make_module(
        """
        from cogworker_async import job

        @job
        async def from_object() -> None: ...
        """,
    )
    by_name = make_module(
        """
        from cogworker_async import job

        @job
        def from_name() -> None: ...
        """,
    )
    module = importlib.import_module(by_object)
    worker = Worker(Settings(), jobs=[module, by_name, send_email])
    assert worker.registry.names == sorted(
        ["emails.send", f"{by_object}.from_object", f"{by_name}.from_name"]
    )
    assert JobRegistry(module).names == [f"{by_object}.from_object"]  # one alone, not in a list
    with pytest.raises(TypeError, match="a @job function, a module or a module name"):
        JobRegistry([42])  # type: ignore[list-item]


def test_a_builtin_job_is_run_but_not_listed() -> None:
    from cogworker_async import Settings, Worker
    from cogworker_async.workflows import FLOW_STEP

    worker = Worker(Settings(), jobs=[send_email])
    assert worker.registry.names == ["emails.send"]
    assert len(worker.registry) == 1
    assert worker.registry.get(FLOW_STEP.name) is FLOW_STEP
    assert worker.registry.get("emails.send") is send_email
    assert worker.registry.get("nobody") is None
