"""A simulated asynchronous run (:mod:`.async_model`) as our spool, in the trace the V1 async trainers make
(docs/trainers.md, "The trace of each mode"; checked against a 3-step ``otel-verl demo --trainer v1-separate-async``).

Trainer (``step_<n>/trainer.jsonl``): ``verl.step`` (``verl.trainer.mode``, ``parameter_sync_step``) → ``verl.update``
per inner update (links → every group it consumed, with ``verl.dispatch.step``, the group's policy versions and its
staleness) → ``verl.phase gen`` (the wait for samples) and the update's phases; ``verl.phase update_weights`` →
``verl.weight_sync`` (version, backend, replicas, bytes). The first weight sync, before training, is a root in
``no_step``.

Rollout (``step_<dispatch step>/worker_<rank>.jsonl``): each dispatch's ``verl.rollout.worker`` (under the
dispatching step's first ``gen``; the warm-up batch's are roots) with its ``verl.barrier`` (its work's end → the
step's sync point: the weight sync's start, or colocate's end of sampling; 0 s with requests in flight); each sample
group a trace of its own, ``verl.rollout.group`` (a link → its worker span) → ``verl.rollout.request`` (policy
versions) → ``verl.preprocess``, ``verl.rollout.turn`` → ``verl.generate`` (the round trip: stop reason,
``num_resumes``) → one ``text_completion <model>`` per attempt (its own ``gen_ai.usage``, ``verl.policy.version``;
an aborted attempt stops ``aborted``) → the engine's ``llm_request`` under the attempt that finished (format
``otlp_engine``); ``verl.tool_parse``, ``execute_tool``, the merge's ``verl.preprocess``; ``verl.reward``.
"""

from __future__ import annotations

import bisect
import random
from pathlib import Path
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind

from benchmarks.diagnosis.async_model import SEPARATE, AsyncRun, AsyncStep, Dispatch, RealRequest, turn_at
from benchmarks.diagnosis.write_otlp import RUN_NAME
from benchmarks.gen_spool import MODEL, T0_NS, GenStats, SpanIds, otlp_resource
from otel_verl import semconv as sc
from otel_verl.export.encoding import attributes_json, document_line, encode_span

_KIND = {SpanKind.INTERNAL: "1", SpanKind.SERVER: "2", SpanKind.CLIENT: "3"}
_SCOPE = InstrumentationScope("otel_verl", "0.1.0")


def _ns(t: float) -> int:
    return T0_NS + round(t * 1e9)


class _Out:
    """Encoded spans per file, written in end order, batched as the batch processor does."""

    def __init__(self, rng: random.Random) -> None:
        self.rng, self.files = rng, {}
        self.stats = GenStats()

    def add(
        self,
        file: tuple[str, Resource],
        ids: tuple[str, str, str],
        name: str,
        a: float,
        b: float,
        attrs: dict[str, Any],
        kind: SpanKind = SpanKind.INTERNAL,
        links: list[Link] | None = None,
    ) -> str:
        trace, sid, parent = ids
        text = encode_span(
            trace, sid, parent, name, _KIND[kind], _ns(a), _ns(b), attributes_json(attrs), "{}", links or ()
        )
        self.files.setdefault(file, []).append((_ns(b), text))
        return sid

    def write(self, root: Path, scope_of: dict[str, InstrumentationScope]) -> None:
        for (rel, resource), spans in self.files.items():
            spans.sort(key=lambda x: x[0])
            out, i = [], 0
            scope = scope_of.get(rel, _SCOPE)
            while i < len(spans):
                n = self.rng.randint(64, 512)
                out.append(document_line(resource, scope, [s for _, s in spans[i : i + n]]))
                i += n
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"".join(out))
            self.stats.spans += len(spans)


def _link(trace: str, span: str, attrs: dict[str, Any] | None = None) -> Link:
    return Link(SpanContext(int(trace, 16), int(span, 16), is_remote=True), attrs or {})


class AsyncWriter:
    def __init__(self, run: AsyncRun, root: Path) -> None:
        self.run, self.root = run, root
        self.rng = random.Random(f"{run.seed}:async")
        self.ids = SpanIds(self.rng)
        self.out = _Out(self.rng)
        self.trainer_res = otlp_resource("trainer", 1000, RUN_NAME, None)
        self.worker_res = [otlp_resource("agent_loop_worker", 2000 + w, RUN_NAME, w) for w in range(run.shape.workers)]
        self.sync_ends = sorted(s.sync[1] for s in run.steps)
        self.groups: dict[tuple[int, tuple[int, int]], tuple[str, str, int, int]] = {}
        """(dispatch, group) → (trace, span id, version min, version max)."""
        self.engine: dict[int, list[tuple[float, float, str, str, dict[str, Any]]]] = {}

    def version(self, t: float) -> int:
        """The policy version the engine served at ``t``: weight syncs finished by then."""
        return bisect.bisect_right(self.sync_ends, t)

    def write(self) -> Path:
        run = self.run
        first_gen = {s.step: (self.ids.trace(), self.ids.span()) for s in run.steps}
        worker_spans = {}
        for d in run.dispatches:
            parent = first_gen.get(d.label) if d.index >= run.ashape.lookahead else None
            worker_spans[d.index] = self._dispatch(d, parent)
        sync0 = {
            sc.VERL_SYNC_VERSION: 0,
            sc.VERL_SYNC_BACKEND: self._backend(),
            sc.VERL_SYNC_REPLICAS: run.shape.replicas,
        }
        self.out.add(("no_step/trainer.jsonl", self.trainer_res), (self.ids.trace(), self.ids.span(), ""),
                     sc.SPAN_WEIGHT_SYNC, -0.15, -0.05, sync0)  # fmt: skip
        for s in run.steps:
            self._step(s, first_gen[s.step])
        for replica, spans in sorted(self.engine.items()):
            res = Resource(
                {"service.name": "verl.vllm", "vllm.process_id": str(3000 + replica), sc.VERL_ENGINE_REPLICA: replica}
            )
            file = (f"no_step/server_{replica}.jsonl", res)
            for a, b, trace, parent, attrs in spans:
                self.out.add(
                    file, (trace, self.ids.span(), parent), sc.ENGINE_SPAN_REQUEST, a, b, attrs, SpanKind.SERVER
                )
        scopes = {f"no_step/server_{r}.jsonl": InstrumentationScope(sc.ENGINE_SCOPE, "0.24.0") for r in self.engine}
        self.out.write(self.root / RUN_NAME, scopes)
        return self.root

    def _backend(self) -> str:
        return "nccl" if self.run.ashape.mode == SEPARATE else "naive"

    # ------------------------------------------------------------------ rollout
    def _dispatch(self, d: Dispatch, gen: tuple[str, str] | None) -> dict[int, tuple[str, str]]:
        run = self.run
        out = {}
        sync_step = run.steps[d.label - 1] if d.index >= run.ashape.lookahead else None
        for wt in d.workers:
            w = wt.worker
            file = (f"step_{d.label}/worker_{w}.jsonl", self.worker_res[w])
            trace, wid = (gen[0] if gen else self.ids.trace()), self.ids.span()
            out[w] = (trace, wid)
            keys = [(w, i) for i in range(len(wt.requests))]
            statuses = []
            by_group: dict[int, list[int]] = {}
            for i, rq in enumerate(wt.requests):
                by_group.setdefault(rq.draw.sample_index, []).append(i)
            for sample, idx in by_group.items():
                reqs = [d.requests[(w, i)] for i in idx]
                gtrace, gid = self.ids.trace(), self.ids.span()
                versions = [self.version(a[0]) for r in reqs for c in r.calls for a in c.attempts] or [0]
                for r in reqs:
                    statuses.append(self._request(file, gtrace, gid, d, w, r))
                gattrs = {
                    sc.VERL_GROUP_UID: f"{d.index}-{w}-{sample}",
                    sc.VERL_VALIDATE: False,
                    sc.VERL_STEP: d.label,
                    sc.VERL_SAMPLE_INDEX: sample,
                    sc.VERL_WORKER_RANK: w,
                    sc.VERL_GROUP_NUM_SAMPLES: len(reqs),
                    sc.VERL_POLICY_VERSION_MIN: min(versions),
                    sc.VERL_POLICY_VERSION_MAX: max(versions),
                }
                start, end = min(r.start for r in reqs) - 0.002, max(r.end for r in reqs) + 0.001
                self.out.add(file, (gtrace, gid, ""), sc.SPAN_GROUP, start, end, gattrs, links=[_link(trace, wid)])
                self.groups[(d.index, (w, sample))] = (gtrace, gid, min(versions), max(versions))
            end = d.worker_ends[w]
            attrs = {
                sc.VERL_WORKER_RANK: w,
                sc.VERL_STEP: d.label,
                sc.VERL_VALIDATE: False,
                sc.VERL_WORKER_NUM_REQUESTS: len(keys),
                sc.VERL_WORKER_NUM_COMPLETED: len(keys),
                sc.VERL_WORKER_NUM_ABORTED: 0,
            }
            start = d.start + wt.start
            self.out.add(file, (trace, wid, gen[1] if gen else ""), sc.SPAN_WORKER, start, end, attrs)
            if sync_step is not None:
                at = sync_step.weights[0] if run.ashape.mode == SEPARATE else sync_step.updates[-1].gen[1]
                in_flight = sum(d.requests[key].end > at for key in keys)
                battrs = {sc.VERL_STEP: d.label, sc.VERL_BARRIER_SYNC_POINT: sc.BARRIER_WEIGHT_SYNC
                          if run.ashape.mode == SEPARATE else sc.BARRIER_SAMPLE_END,
                          sc.VERL_BARRIER_REQUESTS_IN_FLIGHT: in_flight, sc.VERL_WORKER_RANK: w}  # fmt: skip
                self.out.add(file, (trace, self.ids.span(), wid), sc.SPAN_BARRIER, min(end, at), at, battrs)
        return out

    def _request(self, file: tuple[str, Resource], trace: str, parent: str, d: Dispatch, w: int, r: RealRequest) -> str:
        rq, dr = r.timeline, r.timeline.draw
        base = {sc.VERL_STEP: d.label, sc.VERL_WORKER_RANK: w, sc.VERL_REQUEST_ID: dr.request_id}
        rid = self.ids.span()
        t0 = rq.turns[0]
        add = self.out.add
        add(file, (trace, self.ids.span(), rid), sc.SPAN_PREPROCESS, r.base + t0.start, r.base + t0.call_start,
            {**base, sc.VERL_PREPROCESS_KIND: "initial_prompt"})  # fmt: skip
        context, response = dr.prompt_tokens, 0
        versions = []
        for i, turn in enumerate(rq.turns):
            start = turn_at(r, i, turn.call_start if i == 0 else turn.start)
            tid = add(file, (trace, self.ids.span(), rid), sc.SPAN_TURN, start, turn_at(r, i, turn.end),
                      {**base, sc.VERL_TURN_INDEX: i})  # fmt: skip
            call = r.calls[i]
            reason = "length" if turn.truncated else "completed"
            gid = self.ids.span()
            given = 0
            for n, (a, b, tokens, aborted) in enumerate(call.attempts):
                v = self.version(a)
                versions.append(v)
                stop = "aborted" if aborted else reason
                attrs = {**base, sc.GEN_AI_OPERATION_NAME: sc.GEN_AI_OP_TEXT_COMPLETION, sc.GEN_AI_REQUEST_MODEL: MODEL,
                         sc.GEN_AI_SYSTEM: "vllm", sc.GEN_AI_USAGE_INPUT_TOKENS: context + given,
                         sc.GEN_AI_USAGE_OUTPUT_TOKENS: tokens, sc.VERL_ENGINE_STOP_REASON: stop,
                         sc.GEN_AI_RESPONSE_FINISH_REASONS: [stop], sc.VERL_ENGINE_NUM_PREEMPTED: 0,
                         sc.VERL_POLICY_VERSION: v}  # fmt: skip
                aid = add(
                    file, (trace, self.ids.span(), gid), sc.generate_span_name(MODEL), a, b, attrs, SpanKind.CLIENT
                )
                given += tokens
                if not aborted and self.run.shape.has_engine_spans:
                    self._llm_request(trace, aid, r, i, call.arrival, b, context + given - tokens, tokens, n)
            gattrs = {**base, sc.VERL_ENGINE_STOP_REASON: reason, sc.VERL_REQUEST_NUM_RESUMES: len(call.attempts) - 1}
            add(file, (trace, gid, tid), sc.SPAN_GENERATE, call.start, call.end, gattrs)
            after = turn_at(r, i, turn.call_end)
            parsed = {**base, sc.VERL_TOOL_PARSER: "HermesToolParser", sc.VERL_TOOL_CALL_COUNT: int(turn.has_tool)}
            add(file, (trace, self.ids.span(), tid), sc.SPAN_TOOL_PARSE, after, turn_at(r, i, turn.parse_end), parsed)
            if turn.has_tool:
                tool = {**base, sc.GEN_AI_OPERATION_NAME: sc.GEN_AI_OP_EXECUTE_TOOL, sc.GEN_AI_TOOL_NAME: "python"}
                add(file, (trace, self.ids.span(), tid), sc.tool_span_name("python"), turn_at(r, i, turn.post_end),
                    turn_at(r, i, turn.tool_end), tool)  # fmt: skip
                merge = {**base, sc.VERL_PREPROCESS_KIND: "merge_context"}
                add(file, (trace, self.ids.span(), tid), sc.SPAN_PREPROCESS, turn_at(r, i, turn.tool_end),
                    turn_at(r, i, turn.end), merge)  # fmt: skip
            response += turn.tokens
            context += turn.tokens + turn.draw.tool_tokens
        last = len(rq.turns) - 1
        reward = {**base, sc.VERL_REWARD_REMOTE: False, sc.VERL_REWARD_SCORE: dr.score}
        add(file, (trace, self.ids.span(), rid), sc.SPAN_REWARD, turn_at(r, last, rq.reward_start),
            r.end - dr.finalization, reward)  # fmt: skip
        status = "truncated" if rq.truncated else "completed"
        attrs = {
            sc.VERL_STEP: d.label,
            sc.VERL_SAMPLE_INDEX: dr.sample_index,
            sc.VERL_ROLLOUT_N: dr.rollout_index,
            sc.VERL_VALIDATE: False,
            sc.VERL_REQUEST_AGENT: "tool_agent",
            sc.VERL_WORKER_RANK: w,
            sc.VERL_REQUEST_ID: dr.request_id,
            sc.VERL_REQUEST_RESPONSE_TOKENS: response,
            sc.VERL_REQUEST_PROMPT_TOKENS: dr.prompt_tokens,
            sc.VERL_POLICY_VERSION_MIN: min(versions),
            sc.VERL_POLICY_VERSION_MAX: max(versions),
            sc.VERL_REWARD_SCORE: dr.score,
            sc.VERL_REQUEST_STATUS: status,
            sc.VERL_REQUEST_NUM_TURNS: len(rq.turns),
        }
        add(file, (trace, rid, parent), sc.SPAN_REQUEST, r.start, r.end, attrs)
        return status

    def _llm_request(
        self, trace: str, parent: str, r: RealRequest, i: int, arrival: float, call_end: float, prompt: int,
        tokens: int, attempt: int,
    ) -> None:  # fmt: skip
        """vLLM's span of the attempt that finished: its queue, prefill and decode (the rest of the call's decode
        when it resumed)."""
        turn = r.timeline.turns[i]
        queue = turn.scheduled - (turn.arrival + turn.draw.engine_other / 2)
        prefill = turn.first_token - turn.scheduled if attempt == 0 else prompt * self.run.shape.prefill_s_per_token
        decode = (turn.last_token - turn.first_token) * (tokens / turn.tokens if turn.tokens else 1.0)
        other = turn.draw.engine_other
        start = arrival
        end = start + queue + prefill + decode + other
        attrs = {
            sc.ENGINE_LATENCY_TTFT: other / 2 + queue + prefill,
            sc.ENGINE_LATENCY_E2E: end - start,
            sc.ENGINE_LATENCY_QUEUE: queue,
            sc.ENGINE_USAGE_PROMPT_TOKENS: prompt,
            sc.ENGINE_USAGE_COMPLETION_TOKENS: tokens,
            sc.ENGINE_LATENCY_PREFILL: prefill,
            sc.ENGINE_LATENCY_DECODE: decode,
            sc.ENGINE_LATENCY_INFERENCE: prefill + decode,
            sc.ENGINE_REQUEST_ID: f"{r.timeline.draw.request_id}-{i}-{attempt}",
            sc.ENGINE_REQUEST_MAX_TOKENS: self.run.shape.max_tokens,
            sc.VERL_ENGINE_REPLICA: r.timeline.draw.replica,
        }
        self.engine.setdefault(r.timeline.draw.replica, []).append(
            (start, min(end, call_end - 0.001), trace, parent, attrs)
        )

    # ------------------------------------------------------------------ trainer
    def _step(self, s: AsyncStep, gen: tuple[str, str]) -> None:
        run, add = self.run, self.out.add
        file = (f"step_{s.step}/trainer.jsonl", self.trainer_res)
        trace, step_id = gen[0], self.ids.span()
        for u in s.updates:
            uid = self.ids.span()
            links, stale = [], []
            samples = 0
            for dj, g in u.groups:
                gtrace, gid, vmin, vmax = self.groups[(dj, g)]
                n = len(run.dispatches[dj].groups()[g])
                samples += n
                staleness = (s.step - 1) - vmax
                stale += [staleness] * n
                links.append(_link(gtrace, gid, {sc.VERL_DISPATCH_STEP: run.dispatches[dj].label,
                                                 sc.VERL_POLICY_VERSION_MIN: vmin, sc.VERL_POLICY_VERSION_MAX: vmax,
                                                 sc.VERL_GROUP_NUM_SAMPLES: n, sc.VERL_SAMPLE_STALENESS: staleness,
                                                 sc.VERL_SAMPLE_STALENESS_WORST: (s.step - 1) - vmin}))  # fmt: skip
            gid = gen[1] if u.index == 0 else self.ids.span()
            add(file, (trace, gid, uid), sc.phase_span_name("gen"), *u.gen,
                {sc.VERL_PHASE_NAME: "gen", sc.VERL_STEP: s.step, sc.VERL_UPDATE_INDEX: u.index})  # fmt: skip
            for name, a, b in u.phases:
                add(file, (trace, self.ids.span(), uid), sc.phase_span_name(name), a, b,
                    {sc.VERL_PHASE_NAME: name, sc.VERL_STEP: s.step, sc.VERL_UPDATE_INDEX: u.index})  # fmt: skip
            end = u.phases[-1][2] if u.phases else u.gen[1]
            uattrs = {sc.VERL_STEP: s.step, sc.VERL_UPDATE_INDEX: u.index, sc.VERL_UPDATE_NUM_GROUPS: len(u.groups),
                      sc.VERL_UPDATE_NUM_SAMPLES: samples, sc.VERL_UPDATE_STALENESS_MAX: max(stale, default=0),
                      sc.VERL_UPDATE_STALENESS_MEAN: sum(stale) / len(stale) if stale else 0.0}  # fmt: skip
            add(file, (trace, uid, step_id), sc.SPAN_UPDATE, u.gen[0], end, uattrs, links=links)
        wid = self.ids.span()
        add(file, (trace, wid, step_id), sc.phase_span_name("update_weights"), *s.weights,
            {sc.VERL_PHASE_NAME: "update_weights", sc.VERL_STEP: s.step})  # fmt: skip
        sattrs = {sc.VERL_SYNC_VERSION: s.step, sc.VERL_SYNC_BACKEND: self._backend(),
                  sc.VERL_SYNC_REPLICAS: run.shape.replicas, sc.VERL_STEP: s.step}  # fmt: skip
        if run.ashape.sync_bytes:
            sattrs[sc.VERL_SYNC_BYTES] = run.ashape.sync_bytes
        add(file, (trace, self.ids.span(), wid), sc.SPAN_WEIGHT_SYNC, *s.sync, sattrs)
        attrs = {sc.VERL_STEP: s.step, sc.VERL_TRAINER_MODE: run.ashape.mode,
                 sc.VERL_PARAMETER_SYNC_STEP: run.ashape.updates}  # fmt: skip
        first = getattr(sc, "VERL_TRAINER_FIRST_STEP", None)  # the run's first step (pipeline filling), where named
        if first:
            attrs[first] = 1
        add(file, (trace, step_id, ""), sc.SPAN_STEP, s.start, s.end, attrs)


def write_async(run: AsyncRun, root: str | Path) -> Path:
    """Write ``<root>/bench/...``; returns ``root`` (what ``otel-verl analyze`` reads)."""
    return AsyncWriter(run, Path(root)).write()
