"""What the ``worker`` command imports of the user's code: the job modules, the
lifespan, the periodic entries. Each mistake is one line naming the module and
the error, never a traceback: the command prints it and exits.
"""

from __future__ import annotations

import importlib
import sys
import traceback
from typing import Any

from cogworker_async.periodic_entry import Entry


def import_job_modules(modules: list[str]) -> str | None:
    """Import each job module; the one line for the first that fails, else None.

    Whatever a module raises at import (a SyntaxError, a NameError, an
    ImportError inside it) is the user's code failing, so it is reported as
    one line naming the module, the error and where, not as a traceback.
    """
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - any error in user code at import
            where = ""
            if not isinstance(exc, SyntaxError):  # its str already says (file, line N)
                frames = traceback.extract_tb(exc.__traceback__)
                own = [f for f in frames if "importlib" not in f.filename]
                if own and own[-1].filename != __file__:
                    where = f" ({own[-1].filename}, line {own[-1].lineno})"
            return f"cannot import job module {name!r}: {type(exc).__name__}: {exc}{where}"
    return None


# The module-level name a job module gives its lifespan when ``--lifespan`` is not
# given. Not ``lifespan``: a FastAPI app's module has one of its own, for the app.
MODULE_LIFESPAN = "worker_lifespan"


def find_lifespan(spec: str | None, modules: list[str]) -> tuple[Any, str | None]:
    """The lifespan to run (or None) and the one line for a mistake (else None).

    ``spec`` (``--lifespan module:attr``) wins; without it, a job module's
    ``worker_lifespan``, and two job modules defining one is a mistake.
    Called once the job modules are imported.
    """
    if spec is not None:
        module_name, _, attr = spec.partition(":")
        if not module_name or not attr:
            return None, f"--lifespan {spec!r}: expected module:attr"
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:  # noqa: BLE001 - any error in user code at import
            return None, f"--lifespan {spec!r}: cannot import {module_name!r}: {exc}"
        found: Any = module
        for part in attr.split("."):
            found = getattr(found, part, None)
        if not callable(found):
            return None, f"--lifespan {spec!r}: {module_name} has no callable {attr!r}"
        return found, None
    given = [
        (name, getattr(sys.modules[name], MODULE_LIFESPAN))
        for name in modules
        if name in sys.modules and callable(getattr(sys.modules[name], MODULE_LIFESPAN, None))
    ]
    if len({id(fn) for _, fn in given}) > 1:
        names = ", ".join(name for name, _ in given)
        return None, f"{MODULE_LIFESPAN} is defined in {names}: choose one with --lifespan"
    return (given[0][1] if given else None), None


def find_periodic(specs: list[str]) -> tuple[list[Any], str | None]:
    """The periodic entries named by ``--periodic module:attr`` (each a list of entries)."""
    entries: list[Any] = []
    for spec in specs:
        module_name, _, attr = spec.partition(":")
        if not module_name or not attr:
            return [], f"--periodic {spec!r}: expected module:attr"
        try:
            found: Any = importlib.import_module(module_name)
        except Exception as exc:  # noqa: BLE001 - any error in user code at import
            return [], f"--periodic {spec!r}: cannot import {module_name!r}: {exc}"
        for part in attr.split("."):
            found = getattr(found, part, None)
        if not isinstance(found, list | tuple) or not all(isinstance(e, Entry) for e in found):
            return [], f"--periodic {spec!r}: expected a list of every(...)/cron(...) entries"
        entries.extend(found)
    return entries, None
