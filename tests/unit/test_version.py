"""The version has one source, cogworker_async/_version.py, which everything reads."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from typer.testing import CliRunner

import cogworker_async
from cogworker_async import _version
from cogworker_async.cli import app
from cogworker_async.worker import heartbeat

ROOT = Path(__file__).resolve().parents[2]


def test_pyproject_reads_the_version_from_the_package() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in pyproject["project"], "a second, hand-kept version in pyproject"
    assert "version" in pyproject["project"]["dynamic"]
    assert pyproject["tool"]["hatch"]["version"]["path"] == "cogworker_async/_version.py"


def test_package_presence_info_and_cli_report_that_version() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+\S*", _version.__version__)
    assert cogworker_async.__version__ == _version.__version__
    assert _version.__version__ == heartbeat.VERSION
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == f"cogworker-async {_version.__version__}"


def test_no_other_file_spells_the_version_out() -> None:
    literal = re.compile(rf"""["']{re.escape(_version.__version__)}["']""")
    hits = [
        str(path.relative_to(ROOT))
        for path in [ROOT / "pyproject.toml", *(ROOT / "cogworker_async").rglob("*.py")]
        if path.name != "_version.py" and literal.search(path.read_text())
    ]
    assert hits == []
