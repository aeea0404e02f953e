"""Data quality: what the trace is missing (spans, workers absent or cut short, engine spans without our call)."""
