"""The OTLP/JSON decoders every OTLP source shares (spool, collector files, Jaeger, Tempo).

Lines and documents → span columns.
"""
