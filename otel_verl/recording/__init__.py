"""Record stage: a request's turns and events kept cheaply while it runs, turned into spans when it ends.

``recorder`` keeps one trajectory's turns and events; ``spans`` builds its span objects (:class:`~.spans.RecordedSpan`);
``cutting`` decides which trace they go to; ``sampling`` which of them a worker chunk keeps; ``delivery`` is the
one way out, handed in by export at setup (this stage imports nothing from export).
"""
