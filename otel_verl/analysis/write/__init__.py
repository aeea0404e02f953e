"""Other formats out of the analyzer's span table (the stage after :mod:`..read`; never imported by it).

* :mod:`.seed_to_spool` — ``import-legacy``: the seed's logs → spans in a spool (written by the one OTLP/JSON
  encoder, :mod:`otel_verl.export.encoding`, into files as private as the live spool's)
* :mod:`.seed_logs` — ``export-legacy``: spans → the seed's log layout, for its plotting scripts
  (:mod:`.seed_worker_step`: the seed's once-per-worker-step events)
* :mod:`.perfetto`, :mod:`.perfetto_proto` — ``export-perfetto``: Chrome/Perfetto trace JSON, Perfetto's protobuf
"""
