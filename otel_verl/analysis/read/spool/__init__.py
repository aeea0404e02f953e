"""Our own format on disk: the spool's folders and collector file exports (OTLP/JSON lines).

Read whole or a step at a time.
"""
