"""Several simulated engine replicas behind verl's own load balancer (``--replicas N``).

Why: verl routes every turn of a conversation to the replica its first turn went to (sticky sessions in
``verl.workers.rollout.router.GlobalRequestLoadBalancer``, least-loaded for a new conversation), so one
replica can queue while another idles (verl#6533). The demo runs verl's real balancer and client here;
``replica_capacity`` plants a replica that runs few requests at once, the rest waiting in its queue.
"""

from __future__ import annotations

from typing import Any


def start_sim_servers(
    server_config: Any, model_path: str, replicas: int, replica_capacity: dict[int, int], config: Any
) -> tuple[Any, Any, list[Any]]:
    """(the server the trainer and reward actor talk to, verl's client for the AgentLoopWorkers, every
    replica: each is flushed before the cluster goes).

    One replica: the simulated server behind the demo's direct client (as before). Several: ``sim-<i>``
    actors registered with verl's ``GlobalRequestLoadBalancer`` actor and verl's plain ``LLMServerClient``;
    ``sim-0`` counts finished trajectories for all (over-sampling) and passes each step's settings on.
    """
    import dataclasses

    import ray

    from otel_verl.demo.client import DemoLLMServerClient
    from otel_verl.demo.sim_server import SimLLMServer

    servers = []
    for i in range(replicas):
        cfg = dataclasses.replace(server_config, max_running=replica_capacity.get(i, server_config.max_running))
        servers.append(ray.remote(SimLLMServer).options(num_cpus=0).remote(cfg, model_path, "sglang", f"sim-{i}"))
    if replicas == 1:
        return servers[0], DemoLLMServerClient(config, servers[0]), servers
    from verl.workers.rollout.llm_server import LLMServerClient
    from verl.workers.rollout.router import GlobalRequestLoadBalancer

    ray.get(servers[0].set_peers.remote(servers[1:]))
    balancer = (
        ray.remote(GlobalRequestLoadBalancer)
        .options(num_cpus=0)
        .remote(servers={f"sim-{i}": s for i, s in enumerate(servers)})
    )
    return servers[0], LLMServerClient(config, load_balancer_handle=balancer), servers
