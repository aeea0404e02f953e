"""What moved in one step, occurrence by occurrence: :func:`step_anomalies`.

An *anomaly* is the seconds an occurrence (one engine call's decode, one reward, a worker's start...) took beyond
its part's usual value, for one of three reasons, each with the **scope** it is told at:

* the occurrence alone is far outside the run's spread (its fence, :mod:`.baselines`): scope ``request``
  (a sample group when most of them belong to one prompt, decided when the cause is named);
* its group moved together — the whole step, a replica, a worker or a sample group — beyond how far such groups
  usually stray: that scope, and every occurrence of the group gives back its share
  (``value × (1 − 1/ratio)``);
* nothing moved on its worker for longer than the run's stretches of nothing moving, with requests of different
  prompts in flight: a ``stall``, taken from the parts it stretched (:mod:`.stalls`).

Decode is split by what moved (``V − V0 = (N − N0)·r0 + N·(r − r0)``): more tokens than usual is a
``long_response`` (the usual seconds per token on the extra tokens), more seconds per token a ``slow_decode``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from otel_verl.analysis.findings.account.anomaly_rows import ANOMALY_COLUMNS, anomaly_rows
from otel_verl.analysis.findings.account.baselines import Baselines, Norm, group_log_ratios
from otel_verl.analysis.findings.account.one_row import SCOPE_OF_GROUP, one_row_each
from otel_verl.analysis.findings.account.short_run import short_run_shifts
from otel_verl.analysis.findings.account.stalls import with_stalls
from otel_verl.analysis.findings.common import kinds as k
from otel_verl.analysis.findings.common.chance import run_chance
from otel_verl.analysis.findings.common.row_codes import factorize_rows
from otel_verl.analysis.findings.common.thresholds import Thresholds
from otel_verl.analysis.findings.steps.paused_gaps import PAUSED_SHARE
from otel_verl.analysis.findings.steps.step_statistics import (
    GROUP_REPLICA,
    GROUP_SAMPLE,
    GROUP_STEP,
    GROUP_WORKER,
    METRIC_RATE,
    METRIC_SECONDS,
    METRIC_TOKENS,
    group_key,
)
from otel_verl.analysis.findings.steps.step_summary import StepSummary

GROUP_COLUMN = {GROUP_WORKER: "worker", GROUP_REPLICA: "replica", GROUP_SAMPLE: "sample_index"}
SCALE_FLOOR = 0.05
"""The least spread of group log ratios (5 %): groups that never differ must still move 5 % · z to count."""


def step_anomalies(s: StepSummary, b: Baselines, th: Thresholds) -> pd.DataFrame:
    """Every anomaly of one step: columns :data:`ANOMALY_COLUMNS`, at most one row per (occurrence, cause)."""
    occ = s.occurrences
    if occ.empty:
        return pd.DataFrame(columns=list(ANOMALY_COLUMNS))
    rows = [r for r in (_outliers(occ, b, th, s.step), _shifts(s, b, th)) if len(r)]
    found = one_row_each(pd.concat(rows, ignore_index=True)) if rows else pd.DataFrame(columns=list(ANOMALY_COLUMNS))
    found = with_stalls(s, b, th, found)
    if s.async_account is not None and len(found):  # what waited out a rollout pause is the pause, not its part
        found = found[_paused_share(s, found["occ"].to_numpy(dtype=np.int64)) < PAUSED_SHARE]
    return found.reset_index(drop=True)


def _paused_share(s: StepSummary, i: np.ndarray) -> np.ndarray:
    """Each occurrence's share of its time in a rollout pause. The way to the engine (``engine_before``) is one
    part of its call's span, so its share is the call's paused seconds over the part's own: a colocate-async call
    sent while the replicas slept waits there through the pause (7.4 s inside a 24 s call whose window was 30 %
    paused, async_clean --seed 77001 run 7, told "the way to the engine took 7.4 s": the pause)."""
    occ = s.occurrences
    a, b = occ["start_ns"].to_numpy()[i], occ["end_ns"].to_numpy()[i]
    on = s.async_account.paused_share(a, b)
    value = occ["value_s"].to_numpy(dtype=float)[i]
    before = (occ["part"].to_numpy()[i] == k.PART_ENGINE_BEFORE) & (value > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        own = np.where(before, on * (b - a) / 1e9 / value, on)
    return np.maximum(on, own)


class _Norms:
    """Each occurrence's usual value and fence per metric in one step, looked up once per part, key and, for the
    engine's queue, replica (:meth:`~.baselines.Baselines.replica_norm`). The occurrences are grouped once for
    the three metrics a step reads."""

    def __init__(self, occ: pd.DataFrame, b: Baselines, step: int) -> None:
        replica = occ["replica"].where(occ["part"] == k.PART_ENGINE_QUEUE)
        self.codes, self.uniques = factorize_rows([occ["part"], occ["key"], replica.astype(object).fillna("")])
        self.b, self.step = b, step
        self._norms: dict[str, list[Norm | None]] = {}

    def __call__(self, metric: str) -> tuple[np.ndarray, np.ndarray]:
        med = np.full(len(self.uniques), np.nan)
        fence = np.full(len(self.uniques), np.inf)
        found: list[Norm | None] = []
        self._norms[metric] = found
        for i, (part, key, on) in enumerate(self.uniques):
            n = self.b.replica_norm(part, key, on, metric) if on != "" else self.b.norm(part, key, metric)
            found.append(n)
            if n is not None:
                med[i], fence[i] = n.median, n.fence_in(self.step)
        return med[self.codes], fence[self.codes]

    def chance(self, metric: str, rows: np.ndarray, values: np.ndarray) -> np.ndarray:
        """How likely a clean run shows ``values`` (of occurrences ``rows``) this far out (:mod:`.chance`)."""
        norms = self._norms[metric]
        out = np.ones(len(rows))
        for j, (code, v) in enumerate(zip(self.codes[rows], values, strict=True)):
            n = norms[code]
            if n is not None:
                tested = max(n.count, self.b.tested(self.uniques[code][0], metric))
                out[j] = float(run_chance(n.z(np.array([v]))[0], tested))
        return out


def _outliers(occ: pd.DataFrame, b: Baselines, th: Thresholds, step: int) -> pd.DataFrame:
    v = occ["value_s"].to_numpy(dtype=float)
    part = occ["part"].to_numpy(dtype=object)
    tokens = occ["tokens"].to_numpy(dtype=float)
    dec = (part == k.PART_DECODE) & np.isfinite(tokens) & (tokens > 0)
    norms = _Norms(occ, b, step)
    med, fence = norms(METRIC_SECONDS)
    out = []
    plain = ~dec & (v > fence) & (v - med >= th.occurrence_min_s) & (part != k.PART_PAUSE)  # the sync's cost
    if plain.any():
        i = np.flatnonzero(plain)
        # a worker's own part (its start, its finish) is the worker's; the rest belong to a request
        own = occ["request_span"].to_numpy()[i] < 0
        worker = occ["worker"].to_numpy(dtype=float)[i]
        scope = np.where(own, k.SCOPE_WORKER, k.SCOPE_REQUEST)
        group = np.array([str(int(w)) if o and np.isfinite(w) else "" for o, w in zip(own, worker, strict=True)])
        causes = [k.CAUSE_OF_PART[p] for p in part[i]]
        chance = norms.chance(METRIC_SECONDS, i, v[i])
        out.append(
            anomaly_rows(
                i,
                causes,
                part[i],
                v[i] - med[i],
                scope,
                group,
                METRIC_SECONDS,
                v[i],
                med[i],
                v[i] / fence[i],
                chance=chance,
            )
        )
    if dec.any():
        n0, n_fence = norms(METRIC_TOKENS)
        r0, r_fence = norms(METRIC_RATE)
        rate = np.where(dec, v / np.where(dec, tokens, 1.0), np.nan)
        # a call is only told by its tokens or its rate when its seconds stand out too: 21 tokens in a usual
        # 4 s is a high rate, not a slow engine
        dec &= v >= th.fence_min_ratio * med
        long = dec & (tokens > n_fence) & ((tokens - n0) * r0 >= th.occurrence_min_s)
        if long.any():
            i = np.flatnonzero(long)
            x = np.minimum((tokens[i] - n0[i]) * r0[i], v[i])
            out.append(
                anomaly_rows(
                    i,
                    k.LONG_RESPONSE,
                    part[i],
                    x,
                    k.SCOPE_REQUEST,
                    "",
                    METRIC_TOKENS,
                    tokens[i],
                    n0[i],
                    tokens[i] / n_fence[i],
                    chance=norms.chance(METRIC_TOKENS, i, tokens[i]),
                )
            )
        slow = dec & (rate > r_fence) & (tokens * (rate - r0) >= th.occurrence_min_s)
        if slow.any():
            i = np.flatnonzero(slow)
            x = np.minimum(tokens[i] * (rate[i] - r0[i]), v[i])
            out.append(
                anomaly_rows(
                    i,
                    k.SLOW_DECODE,
                    part[i],
                    x,
                    k.SCOPE_REQUEST,
                    "",
                    METRIC_RATE,
                    rate[i],
                    r0[i],
                    rate[i] / r_fence[i],
                    chance=norms.chance(METRIC_RATE, i, rate[i]),
                )
            )
        # a call far outside its seconds with neither its tokens nor its rate alone beyond theirs (both a little,
        # or engines whose time does not follow the tokens): told by whichever moved more
        both = dec & ~long & ~slow & (v > fence) & (v - med >= th.occurrence_min_s)
        if both.any():
            i = np.flatnonzero(both)
            with np.errstate(divide="ignore", invalid="ignore"):  # a usual of 0 tokens: the tokens moved more
                by_rate = rate[i] / r0[i] >= tokens[i] / n0[i]
            cause = np.where(by_rate, k.SLOW_DECODE, k.LONG_RESPONSE)
            metric = np.where(by_rate, METRIC_RATE, METRIC_TOKENS)
            value = np.where(by_rate, rate[i], tokens[i])
            usual = np.where(by_rate, r0[i], n0[i])
            out.append(
                anomaly_rows(
                    i,
                    cause,
                    part[i],
                    v[i] - med[i],
                    k.SCOPE_REQUEST,
                    "",
                    metric,
                    value,
                    usual,
                    v[i] / fence[i],
                    chance=norms.chance(METRIC_SECONDS, i, v[i]),
                )
            )
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=list(ANOMALY_COLUMNS))


def _shifts(s: StepSummary, b: Baselines, th: Thresholds) -> pd.DataFrame:
    """Occurrences of every group (step, replica, worker, sample) whose median moved beyond such groups' spread."""
    lr = group_log_ratios(s.groups, b)
    moved = _shifted(lr, b, th) if len(lr) else np.zeros(0, dtype=bool)
    if b.other_steps:  # a short run: the step against its other steps, not against how far step medians stray
        keep = (lr["group_type"] != GROUP_STEP).to_numpy()
        short = short_run_shifts(s, b, th)
        lr = pd.concat([x for x in (lr[keep], short) if len(x)], ignore_index=True) if len(short) else lr[keep]
        moved = np.concatenate([moved[keep], np.ones(len(short), dtype=bool)])
    if lr.empty:
        return pd.DataFrame(columns=list(ANOMALY_COLUMNS))
    occ = s.occurrences
    lr = lr[moved & _most_workers_moved(lr, th) & (lr["part"] != k.PART_PAUSE).to_numpy()]
    if lr.empty:
        return pd.DataFrame(columns=list(ANOMALY_COLUMNS))
    index = _GroupIndex(occ)
    value_s, all_tokens = occ["value_s"].to_numpy(dtype=float), occ["tokens"].to_numpy(dtype=float)
    # what a moved group is told against is its occurrences' norms, the very ones an outlier of the same part and
    # key is told against: two findings of one step never give two "usual" values of one thing
    norms = _Norms(occ, b, s.step)
    usual_of = {m: norms(m)[0] for m in (METRIC_SECONDS, METRIC_TOKENS, METRIC_RATE)}
    rows = _Rows()
    for row in lr.itertuples(index=False):
        i = index.rows(row.group_type, row.group, row.part)
        if not len(i):
            continue
        keep = 1.0 - float(np.exp(-row.log_ratio))  # the share of each occurrence the move added
        ratio = float(np.exp(row.log_ratio))
        v, tokens = value_s[i], all_tokens[i]
        told = (row.part, SCOPE_OF_GROUP[row.group_type], row.group, row.metric)
        chance = float(row.chance)
        if row.metric == METRIC_SECONDS and row.part != k.PART_DECODE:
            move = float(row.median - row.usual)
            usual = np.where(np.isfinite(usual_of[METRIC_SECONDS][i]), usual_of[METRIC_SECONDS][i], v / ratio)
            rows.add(i, k.CAUSE_OF_PART[row.part], *told, v * keep, v, usual, move, chance, ratio)
        elif row.metric in (METRIC_TOKENS, METRIC_RATE):
            ok = np.isfinite(tokens) & (tokens > 0)
            if row.metric == METRIC_TOKENS:
                cause, value = k.LONG_RESPONSE, tokens[ok]
            else:
                cause, value = k.SLOW_DECODE, v[ok] / tokens[ok]
            norm = usual_of[row.metric][i[ok]]
            usual = np.where(np.isfinite(norm), norm, value / ratio)
            rows.add(i[ok], cause, *told, v[ok] * keep, value, usual, np.nan, chance, ratio)
    return rows.frame()


class _Rows:
    """The shifted groups' anomaly rows, gathered as arrays and made one frame at the end (a frame per group
    took 1 ms each, and a step with vLLM's spans has ~170 moved groups)."""

    TEXT = ("cause", "part", "scope", "group", "metric")

    def __init__(self) -> None:
        names = ("occ", *self.TEXT, "x", "value", "usual", "move", "chance", "moved")
        self.columns: dict[str, list[np.ndarray]] = {c: [] for c in names}

    def add(
        self,
        occ: np.ndarray,
        cause: str,
        part: str,
        scope: str,
        group: str,
        metric: str,
        x: np.ndarray,
        value: np.ndarray,
        usual: np.ndarray,
        move: float,
        chance: float,
        moved: float,
    ) -> None:
        n = len(occ)
        if not n:
            return
        for name, text in zip(self.TEXT, (cause, part, scope, group, metric), strict=True):
            self.columns[name].append(np.full(n, text, dtype=object))
        for name, values in (("occ", occ), ("x", x), ("value", value), ("usual", usual)):
            self.columns[name].append(np.asarray(values))
        self.columns["move"].append(np.full(n, move, dtype=float))
        self.columns["chance"].append(np.full(n, chance, dtype=float))
        self.columns["moved"].append(np.full(n, moved, dtype=float))

    def frame(self) -> pd.DataFrame:
        if not self.columns["occ"]:
            return pd.DataFrame(columns=list(ANOMALY_COLUMNS))
        c = {name: np.concatenate(parts) for name, parts in self.columns.items()}
        return anomaly_rows(
            c["occ"],
            c["cause"],
            c["part"],
            c["x"],
            c["scope"],
            c["group"],
            c["metric"],
            c["value"],
            c["usual"],
            move=c["move"],
            chance=c["chance"],
            moved=c["moved"],
        )


def _most_workers_moved(lr: pd.DataFrame, th: Thresholds) -> np.ndarray:
    """A step moved as a whole only when its median worker and its median replica moved with it: more than half of
    its workers' (and replicas') medians ``shift_min_ratio`` above the run's and at least half as far (in log ratio)
    as the step's own (with two workers one slow worker moves the step's median, and the other's tools 1.3× slower
    on a busy machine made it "every worker's": that is the slow worker's cause, told at the worker; one slow
    replica of two moves every worker that sends it calls: the replica's). A step's only replica is the step: never
    a group of its own. Other groups pass."""
    group_type = lr["group_type"].to_numpy(dtype=object)
    part_metric = list(zip(lr["part"].to_numpy(dtype=object), lr["metric"].to_numpy(dtype=object), strict=True))
    log_ratio = lr["log_ratio"].to_numpy(dtype=float)
    rows: dict[tuple, list[int]] = {}  # (part, metric, group type) → its rows, in order: one pass, not masks per row
    for i, (pm, gt) in enumerate(zip(part_metric, group_type, strict=True)):
        rows.setdefault((*pm, gt), []).append(i)
    ok = np.ones(len(lr), dtype=bool)
    for i in np.flatnonzero(group_type == GROUP_REPLICA):
        ok[i] = len(rows[(*part_metric[i], GROUP_REPLICA)]) > 1
    for i in np.flatnonzero(group_type == GROUP_STEP):
        floor = max(float(np.log(th.shift_min_ratio)), 0.5 * float(log_ratio[i]))
        for gt in (GROUP_WORKER, GROUP_REPLICA):
            moves = log_ratio[rows.get((*part_metric[i], gt), [])]
            ok[i] &= not len(moves) or float(np.mean(moves >= floor)) > 0.5
    return ok


def _shifted(lr: pd.DataFrame, b: Baselines, th: Thresholds) -> np.ndarray:
    """Which groups moved: enough occurrences, ``shift_min_ratio`` above the run, seconds worth it, and ``shift_z``
    robust deviations beyond how far such groups stray in the run."""
    keys = list(zip(lr["group_type"], lr["part"], lr["metric"], strict=True))
    spreads = [b.spreads.get(key) for key in keys]
    center = np.array([sp.center if sp is not None and sp.groups >= 3 else np.nan for sp in spreads])
    scale = np.array([max(sp.scale, SCALE_FLOOR) if sp is not None else np.nan for sp in spreads])
    log_ratio = lr["log_ratio"].to_numpy(dtype=float)
    groups = np.array([sp.groups if sp is not None else 1 for sp in spreads], dtype=float)
    with np.errstate(invalid="ignore"):
        z = (log_ratio - center) / scale
        ok = (lr["count"].to_numpy() >= th.shift_min_count) & (log_ratio >= np.log(th.shift_min_ratio))
        ok &= z >= th.shift_z
    lr["chance"] = np.where(np.isfinite(z), run_chance(np.nan_to_num(z), groups), 1.0)
    seconds = lr["metric"].to_numpy() == METRIC_SECONDS
    for i in np.flatnonzero(ok & seconds):
        ok[i] = _moved(float(lr["median"].iat[i]), float(lr["usual"].iat[i]), th)
    return ok


class _GroupIndex:
    """Occurrence rows per (group type, group, part), grouped once per step (a step-wide move makes every worker's
    and sample group's median move too: hundreds of groups)."""

    def __init__(self, occ: pd.DataFrame) -> None:
        self._occ = occ
        self._by: dict[str, dict] = {}

    def rows(self, group_type: str, group: str, part: str) -> np.ndarray:
        if group_type not in self._by:
            occ = self._occ
            if group_type == GROUP_STEP:
                self._by[group_type] = occ.groupby(occ["part"].to_numpy(), sort=False).indices
            else:
                col = occ[GROUP_COLUMN[group_type]]
                keys = [group_key(col).to_numpy(), occ["part"].to_numpy()]
                ok = col.notna().to_numpy()
                by = pd.Series(np.arange(len(occ)))[ok].groupby([k_[ok] for k_ in keys], sort=False).indices
                where = np.flatnonzero(ok)  # once, not per group
                self._by[group_type] = {key: where[rows] for key, rows in by.items()}
        by = self._by[group_type]
        return by.get(part if group_type == GROUP_STEP else (group, part), np.zeros(0, dtype=np.int64))


def _moved(value: float, usual: float, th: Thresholds) -> bool:
    """A move worth seconds: ``occurrence_min_s`` above usual, three times that for a part that usually takes
    nothing (a queue that went from 0.1 ms to 30 ms did not move; the log ratio alone says 300×)."""
    floor = th.occurrence_min_s * (th.fence_min_ratio if usual < th.occurrence_min_s else 1.0)
    return value - usual >= floor
