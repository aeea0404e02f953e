"""The CPU demo: real verl rollout code against a simulated LLM server, traced end to end."""

import os

# Under `uv run`, Ray re-launches every worker through `uv run` with a packaged working dir (slow,
# and it re-resolves the environment). The demo's workers use this interpreter as is. Ray reads
# the flag at import time, so it is set before anything here imports ray.
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
# verl's V1 ``fit`` draws a tqdm progress bar over the demo's own output; tqdm reads this when it is imported
os.environ.setdefault("TQDM_DISABLE", "1")
