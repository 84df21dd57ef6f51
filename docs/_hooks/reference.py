"""MkDocs hook: the reference pages that are generated from the code at build time.

* ``reference/cli.md`` from the typer app (``cogworker_async.cli.app``): every
  command, its usage, help, arguments and options;
* the settings table in ``reference/settings.md`` from the pydantic model
  (``cogworker_async.settings.Settings``): name, environment variable, type,
  default, constraints and what it does;
* ``reference/lua.md`` from the opening comment of every script in
  ``lua_scripts/`` (each script's contract).

Generated, never copied by hand, so they cannot drift from the code: a setting
without a description is a warning, which ``mkdocs build --strict`` (``make
docs``) turns into a failure.
"""

from __future__ import annotations

import ast
import logging
import re
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

log = logging.getLogger("mkdocs.hooks.reference")

ROOT = Path(__file__).resolve().parents[2]
SETTINGS_TABLE_MARKER = "<!-- settings-table -->"

# What a setting does, for the fields whose source has no comment right above
# them (a comment there is used first). A key that names no setting fails the build.
SETTING_NOTES: dict[str, str] = {
    "redis_url": (
        "Where Redis is: `redis://[USER:PASSWORD@]HOST[:PORT][/DB]`, `rediss://` for TLS, "
        "`unix:///path/to/redis.sock[?db=DB]`, `redis+sentinel://...` or "
        "`redis+cluster://...` (see [Scaling out](../scaling.md)). Refused before "
        "connecting when malformed; the password is masked in every message."
    ),
    "namespace": (
        "The prefix of every key (`<ns>:queue:default`, ...). With Redis Cluster, "
        "hash-tag it (`{cw}`)."
    ),
    "concurrency": "Processors (jobs run at once) per worker process.",
    "queues": (
        "The queues a worker reads, `name` or `name:weight` (weight 1 to 1000: each "
        "queue is tried first with a chance proportional to its weight). From the "
        'environment: `COGWORKER_QUEUES="mail:3,default"` or a JSON list.'
    ),
    "strict_order": "Read the queues in the order given instead of weighted-random order.",
    "fetch": (
        "`reliable`: every job moves atomically into the process's in-progress list "
        "before it runs (at least once); `basic`: `BRPOP`, at most once; `auto`: "
        "reliable on Redis 6.2 and newer."
    ),
    "shutdown_timeout": (
        "Seconds running jobs get on a graceful stop before they are cancelled and requeued."
    ),
    "heartbeat_interval": "Seconds between a process's beats (its presence key and last beat).",
    "heartbeat_ttl": "Seconds a process's presence key lives: it is *alive* while the key exists.",
    "orphan_threshold": (
        "Seconds since a process's last beat (on Redis's clock) after which, with its "
        "presence key gone, its in-progress jobs are requeued."
    ),
    "orphan_check_interval": "Seconds between two passes of orphan recovery.",
    "max_orphanings": (
        "How often a job may be orphaned (its process died while running it) before "
        "it lands in `dead` as `ProcessDied`."
    ),
    "fetch_idle_max_interval": (
        "The longest an idle processor waits between fetches when no wake-up marker "
        "reaches it (a job pushed by hand without one still runs within this)."
    ),
    "scheduled_poll_interval": (
        "The longest the scheduled poller sleeps, scaled by the number of live "
        "processes; delayed jobs still run on time (the worker sleeps until the "
        "earliest is due)."
    ),
    "dead_max_jobs": "The most entries kept in `dead`; the oldest go first.",
    "dead_timeout": "Seconds a `dead` entry is kept (180 days).",
    "max_retries": "Retries of a job whose `retry` is `True` or unset.",
    "key_check_interval": (
        "Seconds between two passes of the key guard, which quarantines a key of "
        "ours found with the wrong type."
    ),
    "socket_timeout": "Seconds a Redis command may take; the blocking fetch stays below it.",
    "job_timeout": "Default seconds a job may run before it fails with `JobTimeout` (none).",
    "error_message_max": "Characters of a failure's message kept in the job's `error_message`.",
    "error_backtrace_max": (
        "Characters of a failure's traceback kept in its retry or dead entry's "
        "`error_backtrace` and written to the log (its end is kept). Worst case in "
        "Redis: `dead_max_jobs` times this. See [failures](../guides/jobs.md#failures-and-their-tracebacks)."
    ),
    "error_backtrace_frames": (
        "Frames per exception of a failure's traceback (the handler's own: the "
        "library's are dropped): the outermost and the innermost ones."
    ),
    "status_ttl": "Seconds a job's status hash is kept (a day).",
    "keep_result": (
        "Seconds every job's JSON return value is kept for `result()` (none: only jobs "
        "that ask, `@job(keep_result=...)`). See [results](../guides/results.md)."
    ),
    "status_tracking": (
        "Track every job's status in `<ns>:status:<jid>` (off: only jobs that ask, "
        "`@job(status=True)`)."
    ),
    "metrics_history": (
        "Keep the [metrics history](../guides/observability.md#metrics-history) in Redis: "
        "per minute and per job name, runs, failures, run time and a duration histogram. "
        "Off by default: about 0.5-1 µs of worker CPU a job, above the 10% a default may "
        "cost on no-op jobs ([Benchmarks](../benchmarks.md))."
    ),
    "prefetch": (
        "Jobs fetched ahead of demand per process (none: a quarter of `concurrency`, and "
        "two batches more while jobs are quick; `0`: none). Hides the fetch round trip."
    ),
    "give_back_held_after": (
        "Seconds a job fetched ahead may sit unrun, no processor of its process free, "
        "before the jobs held go back to the front of their queues (a free processor "
        "elsewhere takes them) and nothing is held ahead until one here runs short. "
        "A held job waits at most about twice this; a queue paused meanwhile too."
    ),
    "web_auth": (
        "`user:password` for the web UI's basic auth (`cogworker_async.web.basic_auth`); "
        "kept secret in `repr` and logs."
    ),
}


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the generated pages (they have no file under docs/)."""
    for path, content in (("reference/cli.md", cli_page()), ("reference/lua.md", lua_page())):
        files.append(File.generated(config, path, content=content))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Fill the settings table into reference/settings.md."""
    if SETTINGS_TABLE_MARKER in markdown:
        markdown = markdown.replace(SETTINGS_TABLE_MARKER, settings_table())
    return markdown


# -- the command line ------------------------------------------------------------


def cli_page() -> str:
    import typer.main

    from cogworker_async.cli import app

    root = typer.main.get_command(app)
    lines = [
        "# Command line",
        "",
        "Generated from the `cogworker-async` typer app when the docs are built. "
        "Every command takes `--redis-url` and `--namespace` (or `COGWORKER_REDIS_URL`, "
        "`COGWORKER_NAMESPACE`); a mistake is one `error:` line on stderr (exit 2 for "
        "a usage mistake, 1 when the command could not be done). See "
        "[Operating from the command line](../guides/operating.md) for how they fit together.",
        "",
        "```text",
        "cogworker-async [--version] COMMAND [ARGS]...",
        "```",
        "",
    ]
    for path, command in walk_commands(root, ()):
        lines.extend(command_section(path, command))
    return "\n".join(lines) + "\n"


def walk_commands(group: Any, path: tuple[str, ...]) -> list[tuple[tuple[str, ...], Any]]:
    found: list[tuple[tuple[str, ...], Any]] = []
    for name, command in group.commands.items():
        if getattr(command, "hidden", False):
            continue
        found.append(((*path, name), command))
        if hasattr(command, "commands"):
            found.extend(walk_commands(command, (*path, name)))
    return found


def command_section(path: tuple[str, ...], command: Any) -> list[str]:
    is_group = hasattr(command, "commands")
    arguments = [p for p in command.params if not p.opts[0].startswith("-")]
    options = [p for p in command.params if p.opts[0].startswith("-")]
    usage = ["cogworker-async", *path]
    if is_group:
        usage.append("COMMAND [ARGS]...")
    else:
        if options:
            usage.append("[OPTIONS]")
        usage.extend(argument_usage(p) for p in arguments)
    lines = [f"## `{' '.join(path)}`", "", "```text", " ".join(usage), "```", ""]
    help_text = (command.help or command.short_help or "").strip()
    if help_text:
        lines += [help_text.replace("\b\n", ""), ""]
    if is_group:
        names = ", ".join(f"`{name}`" for name in command.commands)
        lines += [f"Commands: {names}.", ""]
    if arguments:
        lines += ["| argument | what it is |", "| --- | --- |"]
        lines += [
            f"| `{argument_usage(p)}` | {cell(getattr(p, 'help', None) or '')} |" for p in arguments
        ]
        lines.append("")
    if options:
        lines += ["| option | what it does | default |", "| --- | --- | --- |"]
        for option in options:
            names = ", ".join(f"`{name}`" for name in (*option.opts, *option.secondary_opts))
            default = option.default
            shown = "" if default is None or (option.is_flag and default is False) else default
            if isinstance(shown, list | tuple):
                shown = ", ".join(str(v) for v in shown)
            shown_cell = f"`{shown}`" if shown != "" else ""
            lines.append(f"| {names} | {cell(option.help or '')} | {shown_cell} |")
        lines.append("")
    return lines


def argument_usage(argument: Any) -> str:
    text = argument.name.upper()
    if argument.nargs == -1:
        text += "..."
    return text if argument.required else f"[{text}]"


def cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


# -- settings --------------------------------------------------------------------


def settings_table() -> str:
    from cogworker_async.settings import Settings

    fields = Settings.model_fields
    unknown = sorted(set(SETTING_NOTES) - set(fields))
    if unknown:
        raise ValueError(f"docs/_hooks/reference.py describes settings that don't exist: {unknown}")
    comments = field_comments(ROOT / "cogworker_async" / "settings.py")
    rows = [
        "| setting | environment | type | default | what it does |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, field in fields.items():
        # The note written for these docs first, then a comment in the model's source
        # (escaped: a comment's <ns> is not HTML).
        comment = comments.get(name, "").replace("<", "&lt;").replace(">", "&gt;")
        description = field.description or SETTING_NOTES.get(name) or comment
        if not description:
            log.warning("setting %r has no description: add one in docs/_hooks/reference.py", name)
            description = ""
        constraint = constraints(field.metadata)
        kind = type_name(field.annotation) + (f" ({constraint})" if constraint else "")
        rows.append(
            f"| `{name}` | `COGWORKER_{name.upper()}` | {cell(kind)} "
            f"| {cell(default_text(field.default))} | {cell(description)} |"
        )
    return "\n".join(rows)


def field_comments(source: Path) -> dict[str, str]:
    """The comment lines right above each ``name: type = ...`` line of the model."""
    lines = source.read_text().splitlines()
    tree = ast.parse(source.read_text())
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "Settings":
            for statement in node.body:
                if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                    comment: list[str] = []
                    index = statement.lineno - 2
                    while index >= 0 and lines[index].strip().startswith("#"):
                        comment.insert(0, lines[index].strip().lstrip("#").strip())
                        index -= 1
                    if comment:
                        found[statement.target.id] = " ".join(comment)
    return found


def type_name(annotation: Any) -> str:
    text = getattr(annotation, "__name__", None) if isinstance(annotation, type) else None
    text = text or str(annotation)
    text = re.sub(r"typing\.|pydantic\.types\.|typing_extensions\.", "", text)
    text = re.sub(r"Annotated\[(.*), NoDecode\]", r"\1", text)
    return f"`{text}`"


def constraints(metadata: list[Any]) -> str:
    words = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<", "min_length": "length ≥"}
    parts = []
    for item in metadata:
        for attribute, symbol in words.items():
            value = getattr(item, attribute, None)
            if value is not None:
                parts.append(
                    f"{symbol} {value:,}" if isinstance(value, int) else f"{symbol} {value}"
                )
    return ", ".join(parts)


def default_text(default: Any) -> str:
    if default is None:
        return "none"
    if isinstance(default, tuple):
        return "`" + ",".join(default) + "`"
    if isinstance(default, float) and default.is_integer():
        default = int(default)
    if isinstance(default, int) and not isinstance(default, bool):
        return f"`{default:,}`".replace(",", "_") if default >= 10_000 else f"`{default}`"
    return f"`{default}`"


# -- Lua scripts -----------------------------------------------------------------


def lua_page() -> str:
    scripts = ROOT / "lua_scripts"
    lines = [
        "# Lua scripts",
        "",
        "Every change of state that must be atomic is one Lua script, one script a "
        "file in `lua_scripts/` (shipped inside the wheel), called only through its "
        "typed wrapper in `cogworker_async/store/`. Each opens with its contract: "
        "what it does, what it guarantees atomically, `KEYS` and `ARGV` by name and "
        "every return shape. This page is generated from those openings when the docs "
        "are built. Shared functions live in `lua_scripts/includes/`, pulled in by a "
        "`--- @include NAME` line.",
        "",
    ]
    for heading, folder in (("Scripts", scripts), ("Includes", scripts / "includes")):
        lines += [f"## {heading}", ""]
        for path in sorted(folder.glob("*.lua")):
            lines += [f"### `{path.relative_to(scripts)}`", "", "```lua", contract(path), "```", ""]
    return "\n".join(lines)


def contract(path: Path) -> str:
    """The script's opening comment block (its contract) and its include lines."""
    kept = []
    for line in path.read_text().splitlines():
        if line.startswith("--"):
            kept.append(line)
        elif line.strip() or kept:
            break
    return "\n".join(kept)
