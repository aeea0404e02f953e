"""``export-perfetto`` in Perfetto's own protobuf trace format (``.pftrace``): every lane named.

Why protobuf and not only the Chrome JSON of :mod:`.perfetto`: Perfetto's JSON import cannot name a lane of async
slices, so each request's lane read "requests, lane 3" and every request slice "request". Perfetto's protobuf
format names any track (``TrackDescriptor``), so here each request gets its own track, named by what a reader looks
for: ``sample 3 · request 71f85cd1… · replica sim-0``. Written with the ``perfetto`` package's own message classes
(generated from Perfetto's .proto files) and its streaming builder, as Perfetto's "converting" guide does.

Tracks (a parent holds its children, folded in the UI until opened):

* ``trainer``: ``steps`` (``step 7``), ``phases`` (one track per level of nesting or overlap), ``validation``, a V1
  trainer's ``inner updates`` and ``weight syncs``;
* ``worker <rank>`` (its replicas in the description): ``worker <rank>: chunks and barrier wait`` (the worker spans,
  its barrier wait, spans of the worker outside any request; an asynchronous trainer's overlapping chunks on
  ``…, 2``, ``…, 3``), its V1 ``sample groups`` (packed tracks: a group
  spans several requests), then one track per request, in time order, holding the request and its turns, engine
  calls (the engine's own spans under them) and events;
* ``spans of no worker``: packed lanes (an engine span no call of ours parented).

Each slice is a ``TYPE_SLICE_BEGIN``/``TYPE_SLICE_END`` pair named by the one label mapping (``engine call``,
``tool: calculator``; a request by its status: ``request completed``), with the span's raw name, ids and every
attribute as debug annotations; a zero-length span is an instant event. Timestamps are the spans' own (ns).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from otel_verl import semconv as sc
from otel_verl.analysis.output_paths import writing
from otel_verl.analysis.report.presenting import counted
from otel_verl.analysis.write.perfetto import TRAINER_LANES, _args, _slice_names, assign_lanes

SEQUENCE_ID = 1
"""One writer, one packet sequence (no interned data, so no incremental state to clear)."""
TRAINER, NO_WORKER, STEPS, VALIDATION = 1, 2, 3, 4
PHASE_BASE = 10**6
"""uuid of the trainer's phase lane k: PHASE_BASE + k."""
NO_WORKER_BASE = 10**7
"""uuid of lane k of the spans of no worker: NO_WORKER_BASE + k."""
WORKER_BASE = 10**9
"""uuid of ``worker <rank>``: WORKER_BASE × (rank + 1); its chunk lane +1; its requests +2, +3, …"""
GROUPS = WORKER_BASE // 2
"""uuid of a worker's sample-group track k: its worker's uuid + GROUPS + k."""
CHUNKS = 3 * WORKER_BASE // 4
"""uuid of a worker's chunk track k > 1 (an asynchronous trainer's chunks overlap): its worker's uuid + CHUNKS + k."""
TRAINER_TRACKS = {kind: 5 + i for i, kind in enumerate(TRAINER_LANES)}
"""uuid of the trainer's track of each span kind beside steps and phases (inner updates, weight syncs)."""


def _tracks_of(sp: pd.DataFrame) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """Each span's track uuid, and the track descriptors (uuid, parent, name, description, ordering)."""
    n = len(sp)
    track = np.zeros(n, dtype=np.int64)
    tracks: list[dict[str, Any]] = []
    kind = sp["kind"].to_numpy(dtype=object)
    names = sp["name"].astype(object).to_numpy()
    worker = pd.to_numeric(sp["worker"], errors="coerce").to_numpy(dtype=float)
    has_worker = ~np.isnan(worker)
    request_span = sp["request_span"].to_numpy() if "request_span" in sp else np.full(n, -1)
    starts, ends = sp["start_ns"].to_numpy(dtype=np.int64), sp["end_ns"].to_numpy(dtype=np.int64)
    replica = _replicas(sp, request_span)
    # workers: a group each, its chunk lane, then a track per request
    for w in sorted({int(x) for x in worker[has_worker]}):
        group = WORKER_BASE * (w + 1)
        mine = has_worker & (worker == w)
        requests = np.flatnonzero(mine & (kind == "request"))
        replicas = sorted({replica[r] for r in requests if replica.get(r)})
        tracks.append(_track(group, 0, f"worker {w}", "replicas: " + ", ".join(replicas) if replicas else ""))
        track[mine] = group + 1
        chunks = np.flatnonzero(mine & ((kind == "worker") | (kind == "barrier")))
        lanes = assign_lanes(starts[chunks], ends[chunks]) if len(chunks) else np.ones(0, dtype=np.int64)
        track[chunks] = np.where(lanes == 1, group + 1, group + CHUNKS + lanes)
        ranks = max(1, len(set(lanes.tolist())))
        for k in range(1, ranks + 1):
            label = f"worker {w}: chunks and barrier wait" + (f", {k}" if k > 1 else "")
            tracks.append(_track(group + 1 if k == 1 else group + CHUNKS + k, group, label, rank=k - 1))
        groups = np.flatnonzero(mine & (kind == "group"))
        lanes = assign_lanes(starts[groups], ends[groups]) if len(groups) else np.zeros(0, dtype=np.int64)
        track[groups] = group + GROUPS + lanes
        tracks += [
            _track(group + GROUPS + k, group, "sample groups", rank=ranks + k) for k in range(1, len(set(lanes)) + 1)
        ]
        ranks += len(set(lanes.tolist()))
        order = requests[np.lexsort((ends[requests], starts[requests]))]
        for i, r in enumerate(order.tolist()):
            name, about = _request_names(sp, r, replica.get(r))
            tracks.append(_track(group + 2 + i, group, name, about, rank=ranks + i + 1))
        request_track = np.zeros(n, dtype=np.int64)
        request_track[order] = group + 2 + np.arange(len(order))
        inside = np.flatnonzero(mine & (request_span >= 0))
        inside = inside[request_track[request_span[inside]] > 0]  # under a request of this worker
        track[inside] = request_track[request_span[inside]]
        track[order] = request_track[order]
    # the trainer: steps, phases (a lane per level of nesting or overlap), validation
    trainer_kind = (kind == "step") | (kind == "phase") | np.isin(kind, list(TRAINER_LANES))
    trainer = ~has_worker & (trainer_kind | (names == sc.SPAN_VALIDATE))
    if trainer.any():
        tracks += [_track(TRAINER, 0, "trainer"), _track(STEPS, TRAINER, "steps", rank=0)]
        for k, uuid in TRAINER_TRACKS.items():
            if (~has_worker & (kind == k)).any():
                tracks.append(_track(uuid, TRAINER, TRAINER_LANES[k][1], rank=10**6 + uuid))  # below the phases
                track[~has_worker & (kind == k)] = uuid
        track[~has_worker & (kind == "step")] = STEPS
        if (trainer & (names == sc.SPAN_VALIDATE)).any():
            tracks.append(_track(VALIDATION, TRAINER, "validation", rank=1))
            track[trainer & (names == sc.SPAN_VALIDATE)] = VALIDATION
        phases = np.flatnonzero(~has_worker & (kind == "phase"))
        if len(phases):
            lanes = assign_lanes(starts[phases], ends[phases])
            track[phases] = PHASE_BASE + lanes
            for lane in range(1, int(lanes.max()) + 1):
                label = "phases" if lane == 1 else f"phases (nested or overlapping, {lane})"
                tracks.append(_track(PHASE_BASE + lane, TRAINER, label, rank=1 + lane))
    rest = np.flatnonzero(track == 0)
    if len(rest):
        lanes = assign_lanes(starts[rest], ends[rest])
        tracks.append(_track(NO_WORKER, 0, "spans of no worker", "spans outside the trainer and the workers"))
        track[rest] = NO_WORKER_BASE + lanes
        tracks += [_track(NO_WORKER_BASE + k, NO_WORKER, f"lane {k}", rank=k) for k in range(1, int(lanes.max()) + 1)]
    return track, tracks


def _track(uuid: int, parent: int, name: str, about: str = "", rank: int | None = None) -> dict[str, Any]:
    return {"uuid": uuid, "parent": parent, "name": name, "description": about, "rank": rank}


def _request_names(sp: pd.DataFrame, row: int, replica: str | None) -> tuple[str, str]:
    """``prompt 3 · request <id> · replica <r>`` and a longer description (step, status, turns)."""
    rec = sp.iloc[row]
    rid = rec.get("request_id")
    sample = rec.get("sample_index")
    parts = [f"prompt {int(sample)}"] if pd.notna(sample) else []
    parts.append(f"request {rid}" if isinstance(rid, str) and rid else f"request span {rec['span_id']}")
    if replica:
        parts.append(f"replica {replica}")
    about = [f"step {int(rec['step'])}"] if pd.notna(rec.get("step")) else []
    if isinstance(rec.get("request_status"), str):
        about.append(rec["request_status"])
    if pd.notna(rec.get("num_turns")):
        about.append(counted(int(rec["num_turns"]), "turn"))
    return " · ".join(parts), ", ".join(about)


def _replicas(sp: pd.DataFrame, request_span: np.ndarray) -> dict[int, str]:
    """Each request row's engine replica: the first ``verl.engine.replica`` among its spans (the engine's own)."""
    if "extra" not in sp:
        return {}
    extra = sp["extra"].astype(object)
    has = np.flatnonzero((request_span >= 0) & extra.str.contains(sc.VERL_ENGINE_REPLICA, regex=False).fillna(False))
    out: dict[int, str] = {}
    for i in has[np.argsort(sp["start_ns"].to_numpy()[has], kind="stable")].tolist():
        r = int(request_span[i])
        if r not in out:
            try:
                value = json.loads(extra.iat[i]).get(sc.VERL_ENGINE_REPLICA)
            except (ValueError, AttributeError):
                continue
            if value not in (None, ""):
                out[r] = str(value)
    return out


def _annotate(event: Any, args: dict[str, Any]) -> None:
    for key, value in args.items():
        a = event.debug_annotations.add()
        a.name = str(key)
        if isinstance(value, bool):
            a.bool_value = value
        elif isinstance(value, (int, np.integer)) and -(2**63) <= int(value) < 2**63:
            a.int_value = int(value)
        elif isinstance(value, (float, np.floating)):
            a.double_value = float(value)
        else:
            a.string_value = value if isinstance(value, str) else json.dumps(value, default=str)


def _request_slice_names(sp: pd.DataFrame, names: list[str]) -> list[str]:
    """A request slice named by its status (``request completed``): Perfetto colours by name."""
    status = sp["request_status"].astype(object).to_numpy() if "request_status" in sp else [None] * len(sp)
    kind = sp["kind"].to_numpy(dtype=object)
    return [
        f"{n} {s}" if k == "request" and isinstance(s, str) and s else n
        for n, k, s in zip(names, kind, status, strict=True)
    ]


def write_perfetto_proto(spans: pd.DataFrame, out: str | Path) -> int:
    """Write ``spans`` as a Perfetto protobuf trace; returns the number of slices (one per span)."""
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TrackDescriptor, TrackEvent
    from perfetto.trace_builder.proto_builder import StreamingTraceProtoBuilder

    sp = spans.reset_index(drop=True)
    out = Path(out)
    with writing(out), out.open("wb") as fh:
        builder = StreamingTraceProtoBuilder(fh)
        if sp.empty:
            return 0
        track, tracks = _tracks_of(sp)
        for t in tracks:
            packet = builder.create_packet()
            packet.trusted_packet_sequence_id = SEQUENCE_ID
            d = packet.track_descriptor
            d.uuid, d.name = t["uuid"], t["name"]
            if t["parent"]:
                d.parent_uuid = t["parent"]
            if t["description"]:
                d.description = t["description"]
            if t["rank"] is not None:
                d.sibling_order_rank = t["rank"]
            d.child_ordering = TrackDescriptor.EXPLICIT
            d.sibling_merge_behavior = TrackDescriptor.SIBLING_MERGE_BEHAVIOR_NONE  # two requests never merge
            builder.write_packet(packet)
        names = _request_slice_names(sp, _slice_names(sp))
        args = _args(sp)
        kinds = sp["kind"].astype(str).to_numpy()
        starts, ends = sp["start_ns"].to_numpy(dtype=np.int64), sp["end_ns"].to_numpy(dtype=np.int64)
        ends = np.maximum(ends, starts)
        # begins at (start, 1, -end): the outer slice first; ends at (end, 0, -start): the inner slice first,
        # and before any slice that begins at the same instant; an instant at (start, 1, ...)
        events = [(int(s), 1, -int(e), i, True) for i, (s, e) in enumerate(zip(starts, ends, strict=True))]
        events += [(int(e), 0, -int(s), i, False) for i, (s, e) in enumerate(zip(starts, ends, strict=True)) if e > s]
        events.sort()
        for ts, _, _, i, begin in events:
            packet = builder.create_packet()
            packet.trusted_packet_sequence_id = SEQUENCE_ID
            packet.timestamp = ts
            ev = packet.track_event
            ev.track_uuid = int(track[i])
            if not begin:
                ev.type = TrackEvent.TYPE_SLICE_END
            else:
                ev.type = TrackEvent.TYPE_SLICE_BEGIN if ends[i] > starts[i] else TrackEvent.TYPE_INSTANT
                ev.name = names[i]
                ev.categories.append(kinds[i])
                _annotate(ev, args[i])
            builder.write_packet(packet)
    return len(sp)
