"""Settings: SPEC §3 defaults, strictness, environment, and the interval rules."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from cogworker_async.settings import QueueSpec, Settings, mask_url, parse_queue_spec

# Keeps every interval rule satisfied, so one test can break exactly one of them.
VALID_FAST: dict[str, Any] = {
    "heartbeat_interval": 0.5,
    "heartbeat_ttl": 2.0,
    "orphan_threshold": 3.5,
    "fetch_idle_max_interval": 0.5,
    "socket_timeout": 5.0,
}


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No COGWORKER_* variable and no .env file of the machine leaks into these tests."""
    for name in list(os.environ):
        if name.upper().startswith("COGWORKER_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def test_defaults_match_spec() -> None:
    s = Settings()
    assert s.redis_url == "redis://localhost:6379/0"
    assert s.namespace == "cogworker"
    assert s.concurrency == 10
    assert s.queues == ("default",)
    assert s.fetch == "auto"
    assert s.shutdown_timeout == 25
    assert s.heartbeat_interval == 5
    assert s.heartbeat_ttl == 20
    assert s.orphan_threshold == 40
    assert s.orphan_check_interval == 10
    assert s.max_orphanings == 3
    assert s.fetch_idle_max_interval == 2
    assert s.scheduled_poll_interval == 5
    assert s.dead_max_jobs == 10_000
    assert s.dead_timeout == 180 * 24 * 3600
    assert s.max_retries == 25
    assert s.key_check_interval == 300


def test_extra_field_rejected() -> None:
    with pytest.raises(ValidationError, match="bogus"):
        Settings(bogus=1)  # type: ignore[call-arg]


def test_settings_are_frozen() -> None:
    s = Settings()
    with pytest.raises(ValidationError):
        s.concurrency = 3


def test_concurrency_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COGWORKER_CONCURRENCY", "37")
    assert Settings().concurrency == 37


def test_bad_concurrency_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COGWORKER_CONCURRENCY", "0")
    with pytest.raises(ValidationError, match="concurrency"):
        Settings()


def test_dotenv_file_honoured(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("COGWORKER_NAMESPACE=fromdotenv\n")
    assert Settings().namespace == "fromdotenv"


def test_explicit_argument_beats_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COGWORKER_CONCURRENCY", "37")
    assert Settings(concurrency=4).concurrency == 4


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"heartbeat_interval": 2.0, "heartbeat_ttl": 2.0}, "heartbeat_ttl"),
        ({"heartbeat_interval": 3.0, "heartbeat_ttl": 2.0}, "heartbeat_ttl"),
        ({"orphan_threshold": 2.0}, "orphan_threshold"),
        ({"orphan_threshold": 1.5}, "orphan_threshold"),
        ({"orphan_threshold": 3.49}, "orphan_threshold"),
        ({"fetch_idle_max_interval": 5.0}, "fetch_idle_max_interval"),
        ({"fetch_idle_max_interval": 6.0}, "fetch_idle_max_interval"),
    ],
)
def test_interval_rules(overrides: dict[str, Any], message: str) -> None:
    Settings(**VALID_FAST)  # the base itself is valid
    with pytest.raises(ValidationError, match=message):
        Settings(**{**VALID_FAST, **overrides})


def test_the_threshold_must_cover_an_outage_the_judge_does_not_see() -> None:
    """Accepted before (threshold above the TTL), yet a 4 s Redis restart got a live
    worker's running job run twice: the judge's beats span an outage under
    heartbeat_ttl unbroken, while the live process is silent an interval before
    it and an interval after. Refused in one line naming the margin."""
    with pytest.raises(ValidationError, match=r"at least heartbeat_ttl \+ 2 x heartbeat_interval"):
        Settings(heartbeat_interval=2, heartbeat_ttl=4.2, orphan_threshold=4.4)
    tightest = Settings(heartbeat_interval=2, heartbeat_ttl=4.2, orphan_threshold=8.7)
    assert tightest.orphan_threshold == 8.7
    with pytest.raises(ValidationError, match="orphan_threshold"):
        Settings(heartbeat_interval=2, heartbeat_ttl=4.2, orphan_threshold=8.69)
    defaults = Settings()
    assert defaults.orphan_threshold >= (
        defaults.heartbeat_ttl + 2 * defaults.heartbeat_interval + 0.5
    )


def test_default_intervals_rule_violation_from_one_change() -> None:
    # Raising only the interval past the default TTL (20 s) must be refused.
    with pytest.raises(ValidationError, match="heartbeat_ttl"):
        Settings(heartbeat_interval=25)


@pytest.mark.parametrize("spec", ["a:b", "a:0", "", "a b", "a:-1", "a:"])
def test_bad_queue_spec_rejected(spec: str) -> None:
    with pytest.raises(ValidationError, match="queue"):
        Settings(queues=(spec,))


def test_bad_queue_spec_message_names_the_spec() -> None:
    with pytest.raises(ValueError, match="'a:b'"):
        parse_queue_spec("a:b")
    with pytest.raises(ValueError, match="at least 1"):
        parse_queue_spec("a:0")


def test_empty_queues_rejected() -> None:
    with pytest.raises(ValidationError, match="at least one queue"):
        Settings(queues=())


def test_queues_from_comma_string() -> None:
    s = Settings(queues="a,b:3")  # type: ignore[arg-type]
    assert s.queues == ("a", "b:3")
    assert s.queue_specs == (QueueSpec("a", 1), QueueSpec("b", 3))


def test_queues_from_environment_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COGWORKER_QUEUES", '["a", "b:3"]')
    assert Settings().queue_specs == (QueueSpec("a", 1), QueueSpec("b", 3))


def test_queues_from_environment_comma_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COGWORKER_QUEUES", "a,b:3")
    s = Settings()
    assert s.queues == ("a", "b:3")
    assert s.queue_specs == (QueueSpec("a", 1), QueueSpec("b", 3))


def test_bad_queue_spec_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COGWORKER_QUEUES", "a,b:0")
    with pytest.raises(ValidationError, match="b:0"):
        Settings()


def test_fractional_intervals_accepted() -> None:
    s = Settings(
        heartbeat_interval=0.1,
        heartbeat_ttl=0.25,
        orphan_threshold=0.95,
        orphan_check_interval=0.15,
        fetch_idle_max_interval=0.05,
        scheduled_poll_interval=0.2,
        shutdown_timeout=0.3,
        socket_timeout=0.5,
        key_check_interval=0.75,
    )
    assert s.heartbeat_interval == 0.1
    assert s.heartbeat_ttl == 0.25
    assert s.orphan_threshold == 0.95
    assert s.fetch_idle_max_interval == 0.05
    assert s.scheduled_poll_interval == 0.2


@pytest.mark.parametrize("field", ["heartbeat_interval", "scheduled_poll_interval", "dead_timeout"])
def test_non_positive_interval_rejected(field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        Settings(**{field: 0})  # type: ignore[arg-type]


def test_fetch_mode_restricted() -> None:
    assert Settings(fetch="basic").fetch == "basic"
    with pytest.raises(ValidationError, match="fetch"):
        Settings(fetch="sometimes")  # type: ignore[arg-type]


def test_queue_specs_parse_weights_and_merge_duplicates() -> None:
    s = Settings(queues=("high:5", "low", "high:1", "low:7", "mid.x-y_z:2"))
    assert s.queue_specs == (QueueSpec("high", 5), QueueSpec("low", 1), QueueSpec("mid.x-y_z", 2))


def test_queue_spec_whitespace_trimmed() -> None:
    assert parse_queue_spec("  mail:4 ") == QueueSpec("mail", 4)
    assert Settings(queues=" a , b:2 ").queue_specs == (  # type: ignore[arg-type]
        QueueSpec("a", 1),
        QueueSpec("b", 2),
    )


def test_dotenv_ignores_other_tools_variables_but_not_our_typos(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("DATABASE_URL=postgres://x\nCOGWORKER_CONCURRENCY=7\n")
    assert Settings().concurrency == 7
    (tmp_path / ".env").write_text("DATABASE_URL=postgres://x\nCOGWORKER_CONCURENCY=7\n")
    with pytest.raises(ValidationError, match="cogworker_concurency"):
        Settings()


@pytest.mark.parametrize(
    "url",
    [
        "redis://localhost:6379/0",
        "redis://localhost",
        "redis://localhost/",
        "REDIS://Host:1/15",
        "rediss://user:pw@redis.example.com:6380/2",
        "redis://:pw@127.0.0.1:65535/0?socket_timeout=3",
        "redis://[::1]:6379/0",
        "redis://h:6379?db=3",
        "unix:///tmp/redis.sock",
        "unix:///tmp/redis.sock?db=2",
        "redis+sentinel://:pw@h:26379,h2:26380/main/2",
        "rediss+sentinel://h/main",
    ],
)
def test_good_redis_urls_accepted_and_shown_without_password(url: str) -> None:
    settings = Settings(redis_url=url)
    assert settings.redis_url == url
    assert "pw" not in settings.masked_redis_url


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("localhost:31457", "no scheme): write redis://localhost:31457/0"),
        ("garbage", "no scheme): write redis://garbage:6379/0"),
        ("", "no scheme"),
        ("http://localhost:6379/0", "scheme 'http://' is not Redis"),
        ("redis+cluster://h:7000,h:x", "bad node 'h:x'"),
        ("redis+cluster://h:7000/3", "a cluster has database 0 only"),
        ("redis+sentinel://h:26379", "name the primary"),
        ("redis+sentinel://h:26379/main/x", "DB index 'x'"),
        ("redis://", "names no host"),
        ("redis:///0", "names no host"),
        ("redis://h:notaport/0", "port must be an integer from 1 to 65535"),
        ("redis://h:0/0", "port must be an integer from 1 to 65535"),
        ("redis://h:65536/0", "port must be an integer from 1 to 65535"),
        ("redis://h:/0", "port must be an integer from 1 to 65535"),
        ("redis://h/abc", "DB index 'abc' must be an integer >= 0"),
        ("redis://h/-1", "DB index '-1' must be an integer >= 0"),
        ("redis://h/0/1", "DB index '0/1'"),
        ("redis://h/0?db=x", "DB index 'x'"),
        ("unix://", "names no socket"),
        ("unix:///tmp/r.sock?db=-2", "DB index '-2'"),
    ],
)
def test_bad_redis_urls_refused_saying_what_to_write(url: str, says: str) -> None:
    with pytest.raises(ValidationError, match="redis_url") as caught:
        Settings(redis_url=url)
    assert says in str(caught.value)


def test_the_db_index_message_says_the_server_checks_its_limit() -> None:
    with pytest.raises(ValidationError, match="checked when connecting"):
        Settings(redis_url="redis://h/x")


def test_bad_redis_url_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COGWORKER_REDIS_URL", "localhost:6379")
    with pytest.raises(ValidationError, match="redis_url"):
        Settings()


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("redis://:S3cret@127.0.0.1:1/0", "redis://:***@127.0.0.1:1/0"),
        ("rediss://user:S3cret@h:6380/2", "rediss://user:***@h:6380/2"),
        ("redis://user:p%40ss:w@h/0", "redis://user:***@h/0"),
        ("redis://h/0?password=S3cret&db=1", "redis://h/0?password=***&db=1"),
        ("unix:///tmp/r.sock?PASSWORD=S3cret", "unix:///tmp/r.sock?PASSWORD=***"),
        ("redis://user@h/0", "redis://user@h/0"),
        ("redis://h:6379/0", "redis://h:6379/0"),
        ("redis:///0", "redis:///0"),
        ("garbage", "garbage"),
        ("redis://:S3cret@[::1", "redis://:***@[::1"),
    ],
)
def test_mask_url(url: str, masked: str) -> None:
    assert mask_url(url) == masked


def test_password_never_in_repr_nor_in_validation_errors() -> None:
    settings = Settings(redis_url="redis://:S3cret@127.0.0.1:1/0")
    assert settings.masked_redis_url == "redis://:***@127.0.0.1:1/0"
    assert "S3cret" not in repr(settings)
    assert "S3cret" not in str(settings)
    assert settings.redis_url == "redis://:S3cret@127.0.0.1:1/0"  # still usable
    with pytest.raises(ValidationError) as caught:
        Settings(redis_url="redis://:S3cret@127.0.0.1:notaport/0")
    assert "S3cret" not in str(caught.value)
    assert "redis://:***@127.0.0.1:notaport/0" in str(caught.value)


@pytest.mark.parametrize("weight", ["1001", "20000000", "99999999999999999999999", "9" * 5000])
def test_weight_bounded(weight: str) -> None:
    with pytest.raises(ValidationError, match="at least 1 and at most 1000"):
        Settings(queues=(f"default:{weight}", "b"))


def test_weight_bounds_inclusive() -> None:
    assert parse_queue_spec("a:1000").weight == 1000
    assert parse_queue_spec("a:1").weight == 1


def test_a_cluster_url_wants_a_hash_tagged_namespace() -> None:
    url = "redis+cluster://:pw@h:7000,h:7001"
    assert Settings(redis_url=url, namespace="{cw}").redis_url == url
    assert "pw" not in Settings(redis_url=url, namespace="{cw}").masked_redis_url
    with pytest.raises(ValidationError, match=r"use namespace='\{cogworker\}'"):
        Settings(redis_url=url)
