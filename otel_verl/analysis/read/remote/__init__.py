"""Remote backends: Jaeger v2 and Tempo query APIs, whole or a step at a time."""
