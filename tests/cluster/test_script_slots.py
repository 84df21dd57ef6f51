"""Every key every script touches is in the namespace's slot, once the namespace is tagged.

The Lua layer runs (in a child pytest) against a cluster node that serves only
the slot of ``{cw}``, with every test's namespace ``{cw}t…``: a key outside that
slot, passed or built inside a script from a prefix, is refused by the server
("non local key"), so the whole layer passing is the proof.
"""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT


def test_every_script_stays_in_the_tags_slot() -> None:
    env = {**os.environ, "COGWORKER_TEST_ONE_NODE_CLUSTER": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "tests/lua"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout
