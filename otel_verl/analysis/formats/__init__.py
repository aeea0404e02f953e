"""Other formats in and out of the analyzer's span table.

* :mod:`.legacy_import` — the seed's ``step_<n>/worker_<rank>.jsonl`` logs → spans (spool or OTLP)
* :mod:`.legacy_export` — spans → the seed's log layout, for its plotting scripts
* :mod:`.legacy_events` — the seed's event names, shared by both directions
* :mod:`.perfetto` — Chrome/Perfetto trace JSON
* :mod:`.seed_fast`, :mod:`.seed_spans` — the seed logs' spans, as spool lines (written by the one OTLP/JSON
  encoder, :mod:`otel_verl.export.encoding`, into files as private as the live spool's) or table columns
"""
