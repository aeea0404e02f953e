"""verl's agent-loop rollout, one job per module.

``manager`` (trainer process): the waiting phase's context rides into each worker chunk. ``barriers``:
``verl.barrier`` per worker and step, to the step's sync point. ``chunk`` (AgentLoopWorker): one
``verl.rollout.worker`` span per ``generate_sequences`` call. ``trajectory``: one request recorder per
``_run_agent_loop``, awaited in a frame of ours, ended with its status. ``events``: turns, preprocess and
tool-parse events inside a trajectory. ``attributes``: what a request span says about its trajectory.
"""
