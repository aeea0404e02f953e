"""The OTLP/JSON decoders every OTLP source shares (spool, collector files, Jaeger, Tempo): lines and documents → span columns."""
