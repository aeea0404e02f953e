"""Export stage: one tracer provider per process and where its spans go.

``provider`` builds it (or ``given_provider`` adopts the user's); ``spool`` writes OTLP/JSON lines to disk through
``encoding`` (the one span encoder); ``otlp`` sends to a collector; ``journal`` and ``replay`` send a spool's
spans once; ``hold`` keeps an open chunk's request spans until it ends; ``guard`` and ``dropped`` keep a failing
or full exporter away from verl; ``flush`` releases and flushes off the event loop; ``tracing`` is this process's
state; ``ids`` the span ids another process must know.
"""
