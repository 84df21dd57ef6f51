"""What a running system tells its operators, beside its logs' content.

``logfmt`` (plain or JSON log lines), ``prometheus`` (the ``metrics`` extra:
a scrape endpoint and per-process counters), ``redis_snapshot`` (the
namespace as a scrape reads it from Redis) and ``tracing`` (the ``otel``
extra: OpenTelemetry spans around enqueue and run).
"""
