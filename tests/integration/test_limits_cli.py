"""``cogworker-async limits list|set|clear`` as a user runs them: real subprocesses,
real Redis; a run-time limit overrides the jobs' own and lets held jobs in."""

from __future__ import annotations

import json

import redis as sync_redis

from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from tests.integration.test_admin_cli import _ok, _one_line_error
from tests.integration.test_cli import cli
from tests.integration.test_metrics import seed_admitted
from tests.lua.support import make_job


def _held(jid: str, key: str) -> bytes:
    return make_job(jid=jid, limits=[["concurrency", key, 1]], limit_slots=[key])


def test_list_set_and_clear(settings: Settings, sync_client: sync_redis.Redis, keys: Keys) -> None:
    assert _ok(cli(settings, "limits", "list")).strip() == "(none)"
    sync_client.sadd(keys.limit_slots("acct:7"), "j0")
    sync_client.lpush(keys.limit_parked("acct:7"), _held("j2", "acct:7"), _held("j1", "acct:7"))
    sync_client.set(keys.limit_pause("stripe"), "1", px=30_000)

    listed = json.loads(_ok(cli(settings, "limits", "list", "--json")))
    assert [row["key"] for row in listed] == ["acct:7", "stripe"]
    assert listed[0] == {
        "key": "acct:7",
        "running": 1,
        "held": 2,
        "limit": None,
        "paused": None,
        "admitted": 0.0,
    }
    assert 25 < listed[1]["paused"] <= 30

    # A run-time limit of 2: one more of acct:7 may run, the oldest held is let in.
    assert "acct:7: limit 2" in _ok(cli(settings, "limits", "set", "acct:7", "2"))
    assert sync_client.hget(keys.limit_config, "acct:7") == b"2"
    assert sync_client.zscore(keys.limit_due, "acct:7") is not None
    _ok(cli(settings, "limits", "set", "api", "100", "--per", "60"))
    assert sync_client.hget(keys.limit_config, "api") == b"100 60000"
    text = _ok(cli(settings, "limits", "list"))
    assert "acct:7\trunning 1\theld 2\tlimit 2" in text
    assert "api\trunning 0\theld 0\tlimit 100 per 60 s\tadmitted 0/s" in text
    seed_admitted(sync_client, keys, {"api": 15, "busy": 3})  # busy: known by admissions only
    text = _ok(cli(settings, "limits", "list"))
    assert "api\trunning 0\theld 0\tlimit 100 per 60 s\tadmitted 1.5/s" in text
    assert "busy\trunning 0\theld 0\tlimit as declared\tadmitted 0.3/s" in text

    assert "cleared" in _ok(cli(settings, "limits", "clear", "stripe"))  # its pause ends
    assert not sync_client.exists(keys.limit_pause("stripe"))
    _ok(cli(settings, "limits", "clear", "acct:7"))
    assert not sync_client.hexists(keys.limit_config, "acct:7")


def test_bad_input_is_one_line_and_changes_nothing(
    settings: Settings, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    _one_line_error(cli(settings, "limits", "set", "k", "0"), 2, "whole number >= 1")
    _one_line_error(cli(settings, "limits", "set", "~due", "3"), 2, "not starting with '~'")
    _one_line_error(cli(settings, "limits", "set", "k", "3", "--per", "-1"), 2, "--per must be")
    _one_line_error(cli(settings, "limits", "clear", "nothing"), 1, "no run-time limit or pause")
    assert not sync_client.exists(keys.limit_config)
