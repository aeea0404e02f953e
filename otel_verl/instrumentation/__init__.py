"""Everything that knows verl: the seam table (``targets``), the policy choosing what a process wraps
(``policy``), and one module per thing recorded: ``trainer``, ``rollout/``, ``llm_server``, ``tools``,
``reward``, ``ray_carrier`` (carriers across Ray processes), ``engine_link`` (the turn's carrier to the engine),
``vllm_tracing`` (vLLM's own spans into otel_verl's exporters)."""
