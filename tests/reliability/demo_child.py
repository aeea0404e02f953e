"""Run ``otel_verl.demo.runner.run_demo`` in its own process and write what verl returned as JSON.

Reliability tests run the demo here, not in the pytest process: each run gets a clean environment
(OTLP endpoint, OTEL_SDK_DISABLED), a fresh Ray cluster, and can be watched and disturbed from the
outside (collector killed, a worker actor SIGKILLed, which makes the run itself fail).

    python tests/reliability/demo_child.py OUT.json [--spool DIR] [--steps N] [--prompts P] [--n N] [--seed S]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--spool")
    parser.add_argument("--run-id")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--n", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seconds-per-token", type=float, default=0.0002)
    args = parser.parse_args()

    from otel_verl.demo.runner import DemoOptions, run_demo

    opts = DemoOptions(
        steps=args.steps,
        workers=args.workers,
        prompts=args.prompts,
        n=args.n,
        seed=args.seed,
        seconds_per_token=args.seconds_per_token,
        ray_cpus=args.workers,
        spool=args.spool,
        run_id=args.run_id,
    )
    started = time.monotonic()
    result = run_demo(opts)
    doc = {
        "run_id": result.run_id,
        "spool_dir": result.spool_dir,
        "step_seconds": result.step_seconds,
        "seconds": time.monotonic() - started,
        "turns": result.turns,
        "outputs": result.outputs,
    }
    args.out.write_text(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
