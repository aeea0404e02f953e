"""Offline analysis of otel_verl traces: loading, figures, diagnosis, legacy formats."""
