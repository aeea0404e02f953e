"""When a step moved as a whole (``findings/anomalies._most_workers_moved``): only when most of its workers and,
with two replicas or more, most of its replicas moved too. With two replicas one slow replica moves the step's
median: that is the replica's cause (the focused engine-queue benchmark told it at step scope, 38 % within three)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from otel_verl.analysis.findings.anomalies import _most_workers_moved
from otel_verl.analysis.findings.step_summary import GROUP_REPLICA, GROUP_STEP, GROUP_WORKER
from otel_verl.analysis.findings.thresholds import Thresholds


def _ratios(workers: list[float], replicas: list[float], step: float = 2.0) -> pd.DataFrame:
    """Group log ratios of one part: the step's, each worker's and each replica's (ratios to the run's median)."""
    rows = [(GROUP_STEP, "", step)]
    rows += [(GROUP_WORKER, str(i), r) for i, r in enumerate(workers)]
    rows += [(GROUP_REPLICA, str(i), r) for i, r in enumerate(replicas)]
    return pd.DataFrame(
        {
            "group_type": [g for g, _, _ in rows],
            "group": [n for _, n, _ in rows],
            "part": "engine_queue",
            "metric": "s",
            "log_ratio": np.log([r for _, _, r in rows]),
        }
    )


def _step_moved(lr: pd.DataFrame) -> bool:
    ok = _most_workers_moved(lr, Thresholds())
    return bool(ok[(lr["group_type"] == GROUP_STEP).to_numpy()][0])


def test_one_slow_replica_of_two_is_not_the_step() -> None:
    # requests of both replicas run on every worker: each worker's median moves with the slow replica's half
    assert not _step_moved(_ratios(workers=[2.0] * 8, replicas=[20.0, 1.0]))
    assert _step_moved(_ratios(workers=[2.0] * 8, replicas=[20.0, 1.5]))  # both replicas moved: the step
    assert not _step_moved(_ratios(workers=[2.0] * 8, replicas=[20.0, 1.0, 1.0, 1.0]))


def test_without_replicas_or_with_one_the_workers_decide() -> None:
    assert _step_moved(_ratios(workers=[2.0] * 8, replicas=[]))
    assert _step_moved(_ratios(workers=[2.0] * 8, replicas=[2.0]))
    assert _step_moved(_ratios(workers=[2.0] * 8, replicas=[1.0]))  # one replica: it is the step
    assert not _step_moved(_ratios(workers=[2.0, 1.0, 1.0], replicas=[]))  # one slow worker of three
    # the other groups always pass
    lr = _ratios(workers=[2.0, 1.0, 1.0], replicas=[20.0, 1.0])
    assert _most_workers_moved(lr, Thresholds())[(lr["group_type"] != GROUP_STEP).to_numpy()].all()
