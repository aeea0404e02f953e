"""Everything that knows verl: the seam table (``targets``), the policy choosing what a process wraps
(``policy``), and one module per thing recorded: ``trainer``, ``rollout/``, ``llm_server``, ``tools``,
``reward``, ``propagation`` (carriers across Ray processes)."""
