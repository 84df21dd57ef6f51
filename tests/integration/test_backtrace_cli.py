"""``cogworker-async dead show`` / ``retry show``: an entry in full, its backtrace printed."""

from __future__ import annotations

import json

import redis as sync_redis

from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from tests.integration.test_admin_cli import _failed, _ok, _one_line_error
from tests.integration.test_cli import cli
from tests.lua.support import jid_of

TRACE = 'Traceback (most recent call last):\n  File "app/billing.py", line 12, in charge\n'


def test_show_prints_the_entry_and_its_backtrace(
    settings: Settings, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    kept = _failed("billing.charge", error_backtrace=TRACE + "LookupError: no card")
    bare = _failed("billing.refund", args=[7])
    sync_client.zadd(keys.dead, {kept: 1_700_000_000.0, bare: 1_700_000_001.0})
    sync_client.zadd(keys.retry, {kept: 1_700_000_000.0})

    for group in ("dead", "retry"):
        shown = _ok(cli(settings, group, "show", jid_of(kept)))
        assert "job          billing.charge" in shown
        assert "error        RuntimeError: boom" in shown
        assert shown.rstrip().endswith("backtrace:\n" + TRACE + "LookupError: no card")
    both = _ok(cli(settings, "dead", "show", jid_of(kept), jid_of(bare)))
    assert both.count("backtrace:") == 1  # the entry that kept none shows none
    assert "arguments    [7]" in both
    (as_json,) = json.loads(_ok(cli(settings, "dead", "show", jid_of(kept), "--json")))
    assert as_json["job"]["error_backtrace"].endswith("LookupError: no card")
    _one_line_error(cli(settings, "dead", "show", "f" * 24), 1, "no entry of dead matched")
