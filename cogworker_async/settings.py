"""Configuration, read once and passed explicitly.

`Settings` is the only place the environment (``COGWORKER_*`` and ``.env``) is
read. It is strict and validated up front so that a bad interval is a clear
error at start-up instead of a liveness bug hours later: the orphan-recovery
rules only hold while ``heartbeat_interval < heartbeat_ttl < orphan_threshold``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal
from urllib.parse import parse_qsl, urlsplit

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from cogworker_async.timing import MAX_DURATION
from cogworker_async.topology import CLUSTER_SCHEMES, hash_tag, parse_topology, scheme_of

_QUEUE_NAME = re.compile(r"[A-Za-z0-9_.\-]+")
_QUEUE_SPEC = re.compile(r"(?P<name>[A-Za-z0-9_.\-]+)(?::(?P<weight>\d+))?")
MAX_QUEUE_NAME = 255
"""The longest queue name (characters): a name is in every job and key of its queue."""
QUEUE_NAME_RULE = (
    f"letters, digits, '_', '-' and '.' only, at most {MAX_QUEUE_NAME} characters, "
    "as a worker's -q takes them"
)
MAX_JOB_NAME = 1024
"""The longest job name (characters): it travels in every payload's ``class``
and is shown in every list; ``module.qualname`` fits with room to spare."""
# A weight is a share, not a count: 1000 to 1 is as lopsided as a queue order
# gets, and the bound keeps a typo (20000000, or 23 digits) a clear error.
MAX_WEIGHT = 1000


@dataclass(frozen=True, slots=True)
class QueueSpec:
    """One queue a worker reads, with its weight (1 when not given)."""

    name: str
    weight: int = 1


def check_queue_name(name: object) -> str:
    """``name`` if a worker could read it; else a ValueError naming the rule.

    The one queue-name rule of the client, the CLI and the admin commands: a
    job put on a queue no ``-q`` accepts would never run.
    """
    if (
        not isinstance(name, str)
        or len(name) > MAX_QUEUE_NAME
        or _QUEUE_NAME.fullmatch(name) is None
    ):
        shown = _shown(name) if isinstance(name, str) else type(name).__name__
        raise ValueError(f"bad queue name {shown}: {QUEUE_NAME_RULE}")
    return name


def check_job_name(name: object) -> str:
    """``name`` if it can name a job: a non-empty string of at most ``MAX_JOB_NAME`` characters."""
    if not isinstance(name, str) or not name or len(name) > MAX_JOB_NAME:
        shown = _shown(name) if isinstance(name, str) else type(name).__name__
        raise ValueError(
            f"bad job name {shown}: a non-empty string of at most {MAX_JOB_NAME} characters"
        )
    return name


def _shown(text: str, limit: int = 80) -> str:
    """``text`` quoted for an error line, clipped: the line stays a line for a huge name."""
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}... ({len(text)} characters)"


def parse_queue_spec(spec: str) -> QueueSpec:
    """Parse ``name`` or ``name:weight``; a ValueError names what is wrong."""
    match = _QUEUE_SPEC.fullmatch(spec.strip())
    if match is None:
        raise ValueError(
            f"bad queue spec {spec!r}: expected NAME or NAME:WEIGHT "
            f"({QUEUE_NAME_RULE}; weight an integer from 1 to {MAX_WEIGHT})"
        )
    digits = match["weight"]
    # Checked by length first: int() of thousands of digits is refused (or slow).
    weight = 1 if digits is None else int(digits) if len(digits) <= 6 else MAX_WEIGHT + 1
    if not 1 <= weight <= MAX_WEIGHT:
        raise ValueError(
            f"bad queue spec {spec!r}: the weight must be at least 1 and at most {MAX_WEIGHT} "
            "(a queue's share of fetches is its weight over the sum of weights)"
        )
    return QueueSpec(match["name"], weight)


LIVENESS_SLACK = 0.5
"""Seconds beyond ``heartbeat_ttl + 2 x heartbeat_interval`` that ``orphan_threshold``
must have: a beat's own round trip and its thread's wake-up on a loaded machine."""


def liveness_margin(heartbeat_interval: float, heartbeat_ttl: float) -> float:
    """The least ``orphan_threshold`` under which no live process is judged dead.

    The judge rule (requeue.lua, "Who may judge") trusts a judge whose beats
    had no gap over ``heartbeat_ttl``: an outage (a restart, refused writes) of
    up to ``heartbeat_ttl`` can pass without breaking its run. A live process
    beat up to one ``heartbeat_interval`` before that outage and beats again
    within one interval after it (the heartbeat loop waits an interval between
    tries), so it may be silent for ``heartbeat_ttl + 2 x heartbeat_interval``
    (plus the slack) without being dead. A longer outage breaks the judge's
    run, and then nobody is judged for ``orphan_threshold``.
    """
    return round(heartbeat_ttl + 2 * heartbeat_interval + LIVENESS_SLACK, 6)


class Settings(BaseSettings):
    """Every knob of clients and workers. Intervals are seconds and may be fractions."""

    model_config = SettingsConfigDict(
        env_prefix="COGWORKER_",
        env_file=".env",
        extra="forbid",
        frozen=True,
        # A rejected redis_url may hold a password: errors name the field and
        # what is wrong (with the URL masked), never echo the raw input.
        hide_input_in_errors=True,
    )

    redis_url: str = "redis://localhost:6379/0"
    namespace: str = Field(default="cogworker", min_length=1)
    concurrency: int = Field(default=10, ge=1, le=10_000)
    # NoDecode: from the environment, "a,b:3" (or a JSON list) is split below.
    queues: Annotated[tuple[str, ...], NoDecode] = ("default",)
    strict_order: bool = False
    fetch: Literal["auto", "reliable", "basic"] = "auto"
    shutdown_timeout: float = Field(default=25.0, ge=0)
    heartbeat_interval: float = Field(default=5.0, gt=0)
    heartbeat_ttl: float = Field(default=20.0, gt=0)
    orphan_threshold: float = Field(default=40.0, gt=0)
    orphan_check_interval: float = Field(default=10.0, gt=0)
    max_orphanings: int = Field(default=3, ge=0)
    fetch_idle_max_interval: float = Field(default=2.0, gt=0)
    scheduled_poll_interval: float = Field(default=5.0, gt=0)
    dead_max_jobs: int = Field(default=10_000, ge=1)
    dead_timeout: float = Field(default=180 * 24 * 3600.0, gt=0)
    max_retries: int = Field(default=25, ge=0)
    # Retries for a job whose name no handler here knows (UnknownJob): none by
    # default, it goes to dead at once (retrying makes no handler appear). Set
    # a few (3 spans 1-2 minutes of backoff) while a deploy that adds jobs rolls out.
    unknown_job_retries: int = Field(default=0, ge=0)
    key_check_interval: float = Field(default=300.0, gt=0)
    socket_timeout: float = Field(default=10.0, gt=0)
    job_timeout: float | None = Field(default=None, gt=0, le=MAX_DURATION)
    error_message_max: int = Field(default=1000, ge=16)
    # A failure's traceback, logged and kept in its retry/dead entry's
    # error_backtrace (worker/backtraces.py): at most this many characters...
    error_backtrace_max: int = Field(default=4000, ge=256, le=1_000_000)
    # ... and this many frames per exception (the handler's, library frames dropped).
    error_backtrace_frames: int = Field(default=20, ge=1, le=1000)
    # Results and status (opt-in per job; these turn them on for every job).
    # keep_result: seconds a handler's JSON return value is kept (None: only
    # for jobs that ask, ``@job(keep_result=...)``).
    keep_result: float | None = Field(default=None, gt=0, le=MAX_DURATION)
    # Track every job's status in <ns>:status:<jid> (off: only jobs that ask).
    status_tracking: bool = False
    status_ttl: float = Field(default=24 * 3600.0, gt=0, le=MAX_DURATION)
    # The metrics history (<ns>:history:<minute>): per minute and per job name,
    # runs, failures, run time and a duration histogram, counted in the calls
    # that settle the jobs. No extra round trip, but ~0.5-1 µs of worker CPU a
    # job: measured above the 10% bar on no-op jobs, so off by default
    # (BENCHMARKS.md, "Metrics history").
    metrics_history: bool = False
    # Jobs fetched ahead of demand per process (None: a quarter of concurrency;
    # 0: none). Hides the fetch round trip. Safe beside a job that crashes its
    # process: a job orphaned twice runs alone, with nothing prefetched beside it.
    prefetch: int | None = Field(default=None, ge=0)
    # Seconds a job fetched ahead may sit unrun (no processor of this process
    # free) before every job held goes back to the front of its queue, where a
    # free processor elsewhere takes it; then nothing is held ahead until a
    # processor here runs short. Held jobs wait at most about twice this.
    give_back_held_after: float = Field(default=0.05, gt=0)
    # The web UI's basic-auth credentials, "user:password" (web.basic_auth reads it).
    web_auth: SecretStr | None = None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # A project's .env holds other tools' variables too (DATABASE_URL, ...):
        # only ours may count, and an unknown COGWORKER_* one is still an error.
        class OwnDotEnv(PydanticBaseSettingsSource):
            def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
                return None, field_name, False

            def __call__(self) -> dict[str, Any]:
                return {
                    key: value
                    for key, value in dotenv_settings().items()
                    if key in settings_cls.model_fields or key.lower().startswith("cogworker_")
                }

        return init_settings, env_settings, OwnDotEnv(settings_cls), file_secret_settings

    @field_validator("redis_url")
    @classmethod
    def _check_redis_url(cls, value: str) -> str:
        check_redis_url(value)
        return value

    def __repr_args__(self) -> Any:
        # repr(settings) lands in logs and tracebacks: never with the password.
        for name, value in super().__repr_args__():
            yield name, (mask_url(value) if name == "redis_url" else value)

    @property
    def masked_redis_url(self) -> str:
        """``redis_url`` with its password replaced by ``***``: the form to print or log."""
        return mask_url(self.redis_url)

    @field_validator("queues", mode="before")
    @classmethod
    def _split_queues(cls, value: object) -> object:
        # From the environment a list arrives as "a,b:2" or as JSON.
        if isinstance(value, str):
            if value.lstrip().startswith("["):
                return tuple(json.loads(value))
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("queues")
    @classmethod
    def _check_queues(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("at least one queue is needed")
        for spec in value:
            parse_queue_spec(spec)
        return value

    @model_validator(mode="after")
    def _check_intervals(self) -> Settings:
        if self.heartbeat_ttl <= self.heartbeat_interval:
            raise ValueError(
                f"heartbeat_ttl ({self.heartbeat_ttl}) must exceed heartbeat_interval "
                f"({self.heartbeat_interval}), or a live process's presence lapses between beats"
            )
        needed = liveness_margin(self.heartbeat_interval, self.heartbeat_ttl)
        if self.orphan_threshold < needed:
            raise ValueError(
                f"orphan_threshold ({self.orphan_threshold}) must be at least heartbeat_ttl + "
                f"2 x heartbeat_interval + {LIVENESS_SLACK} s ({needed:g}): a Redis outage just "
                "under heartbeat_ttl leaves the judge's beats unbroken while a live process, "
                "silent one interval before it and one after, would be judged dead"
            )
        if scheme_of(self.redis_url) in CLUSTER_SCHEMES and hash_tag(self.namespace) is None:
            raise ValueError(
                f"namespace {self.namespace!r} has no hash tag, so its keys would spread over "
                f"the cluster's slots: use namespace='{{{self.namespace}}}' (or any '{{tag}}')"
            )
        if self.fetch_idle_max_interval >= self.socket_timeout:
            raise ValueError(
                f"fetch_idle_max_interval ({self.fetch_idle_max_interval}) is the blocking-fetch "
                f"timeout and must stay below socket_timeout ({self.socket_timeout})"
            )
        return self

    @property
    def effective_prefetch(self) -> int:
        return self.concurrency // 4 if self.prefetch is None else self.prefetch

    @property
    def queue_specs(self) -> tuple[QueueSpec, ...]:
        """The queues as parsed specs, duplicates merged (first weight wins)."""
        seen: dict[str, QueueSpec] = {}
        for spec in self.queues:
            parsed = parse_queue_spec(spec)
            seen.setdefault(parsed.name, parsed)
        return tuple(seen.values())


_SCHEMES = ("redis", "rediss", "unix")
_MULTI_NODE = ("redis+cluster", "redis+sentinel", "rediss+cluster", "rediss+sentinel")
_HOST_PORT_DB = re.compile(r"^(?P<host>[A-Za-z0-9_.\-]+)(?::(?P<port>\d+))?(?:/(?P<db>\d+))?$")
_SECRET_QUERY = {"password"}


def mask_url(url: str) -> str:
    """``url`` with any password (``:secret@``, ``?password=``) replaced by ``***``.

    The one way a Redis URL is printed or logged. Never raises: a URL too
    broken to parse is masked by pattern instead.
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return re.sub(r"(//[^/@]*?:)[^/@]*@", r"\1***@", url)
    netloc = parts.netloc
    userinfo, at, hostport = netloc.rpartition("@")
    if at and ":" in userinfo:
        netloc = f"{userinfo.partition(':')[0]}:***@{hostport}"
    query = "&".join(
        f"{key}=***" if key.lower() in _SECRET_QUERY else piece
        for piece in parts.query.split("&")
        for key in [piece.partition("=")[0]]
    )
    if netloc == parts.netloc and query == parts.query:
        return url
    tail = (f"?{query}" if query else "") + (f"#{parts.fragment}" if parts.fragment else "")
    return f"{parts.scheme}://{netloc}{parts.path}{tail}"


def check_redis_url(url: str) -> None:
    """Refuse a ``redis_url`` redis-py would misread or fail on later; the
    ValueError says what is wrong and what to write instead (password masked).

    Accepted: ``redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]`` (``rediss://`` for
    TLS), ``unix:///PATH/TO.sock[?db=DB]``, ``redis+cluster://HOST:PORT[,HOST:PORT...]``
    and ``redis+sentinel://HOST:PORT[,HOST:PORT...]/SERVICE[/DB]``. The DB index is checked to be an
    integer >= 0 here; whether the server has that many databases is only
    known when connecting.
    """
    shown = mask_url(url)
    example = "redis://localhost:6379/0 (rediss:// for TLS, unix:///path/to/redis.sock)"
    if scheme_of(url) in _MULTI_NODE:
        try:
            parse_topology(url)
        except ValueError as exc:
            raise ValueError(f"{shown!r}: {exc}") from None
        return
    if "://" not in url:
        hint = example
        if (bare := _HOST_PORT_DB.match(url)) is not None:
            hint = f"redis://{bare['host']}:{bare['port'] or 6379}/{bare['db'] or 0}"
        raise ValueError(f"{shown!r} is not a Redis URL (no scheme): write {hint}")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        if "port" in str(exc).lower():
            raise ValueError(f"{shown!r}: the port must be an integer from 1 to 65535") from None
        raise ValueError(f"{shown!r} is not a valid URL ({exc}): write {example}") from None
    scheme = url.partition("://")[0].lower()
    if scheme not in _SCHEMES:
        raise ValueError(
            f"{shown!r}: scheme {scheme + '://'!r} is not Redis: use redis://, "
            "rediss:// (TLS) or unix:// (a socket), e.g. redis://localhost:6379/0"
        )
    if scheme == "unix":
        if not parts.path:
            raise ValueError(f"{shown!r} names no socket: write unix:///path/to/redis.sock")
    else:
        if not parts.hostname:
            raise ValueError(f"{shown!r} names no host: write redis://HOST:PORT/DB")
        if port == 0 or (port is None and parts.netloc.endswith(":")):
            raise ValueError(f"{shown!r}: the port must be an integer from 1 to 65535")
    databases = [value for key, value in parse_qsl(parts.query) if key == "db"]
    if scheme != "unix" and parts.path not in ("", "/"):
        databases.append(parts.path[1:])
    for db in databases:
        if not (db.isascii() and db.isdigit()):
            raise ValueError(
                f"{shown!r}: the DB index {db!r} must be an integer >= 0 "
                "(the server's limit, 16 by default, is checked when connecting)"
            )
