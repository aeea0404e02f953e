"""How findings.json reads to a person: the words report.html and the CLI summary share.

Both read findings as the JSON dicts of findings.json (``kind``, ``severity``, ``steps``, ``workers``,
``seconds``, ``message``, ``evidence``, ``trace_ids``, ``details``): :func:`as_dicts` turns today's finding
objects into them (``to_json()``), and fills ``steps``/``workers`` from a lone ``step``/``worker``, so the same
code shows the old findings and the new diagnosis's. Nothing here prints a Python dict or a shortened id.
"""

from __future__ import annotations

import re
import shlex
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

import numpy as np

from otel_verl.analysis.findings.common.record import number_ranges
from otel_verl.invocation import otel_verl_command

SEVERITY_WORDS = {"critical": ("critical", "critical"), "warning": ("warning", "warnings"), "info": ("info", "info")}
"""Severities as counted in words: findings.json's own names (``info``, not "note": the CLI once counted "2 notes"
that report.html and findings.json label ``info``, issue 51)."""
PERFETTO_UI = "https://ui.perfetto.dev"
JAEGER_TRACE_URL = "http://127.0.0.1:16686/trace/{trace_id}"
"""The ``--trace-url`` a hint suggests: the Jaeger that ``scripts/jaeger.sh up`` and ``docker compose up -d`` serve
(the demo's Jaeger lines), so it runs as printed; it said ``JAEGER-HOST``, a placeholder no shell resolves
(issue 51). Another Jaeger: its own address, or analyze that Jaeger, whose trace ids link to it."""


def as_dicts(findings: Iterable[Any]) -> list[dict[str, Any]]:
    """Findings as findings.json dicts (objects through ``to_json()``), with ``steps`` and ``workers`` lists."""
    out = []
    for f in findings:
        d = dict(f.to_json() if hasattr(f, "to_json") else f)
        if not d.get("steps"):
            d["steps"] = [d["step"]] if d.get("step") is not None else []
        if not d.get("workers"):
            d["workers"] = [d["worker"]] if d.get("worker") is not None else []
        if not d.get("trace_ids"):
            d["trace_ids"] = list(dict.fromkeys(e["trace_id"] for e in d.get("evidence") or [] if e.get("trace_id")))
        d.setdefault("details", {})
        out.append(d)
    return out


def seconds_words(seconds: float | None) -> str:
    """Seconds as every message writes them (``0.27 s``, ``12.3 s``, ``140 s``): one precision for a table and the
    messages beside it (:func:`otel_verl.analysis.findings.common.record.fmt_s`)."""
    from otel_verl.analysis.findings.common.record import fmt_s

    return fmt_s(float("nan") if seconds is None else float(seconds))


def counted(n: int, word: str) -> str:
    """``1 step``, ``3 steps``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def signed_seconds(seconds: float | None) -> str:
    """``+20.4 s``, ``−0.27 s``: an excess, at :func:`seconds_words`'s precision."""
    if seconds is None or seconds != seconds:
        return seconds_words(None)
    return ("+" if seconds >= 0 else "−") + seconds_words(abs(seconds))


def severity_counts(findings: Iterable[Mapping[str, Any]]) -> str:
    """``1 critical, 2 warnings, 3 info`` (``none`` when empty)."""
    counts = Counter(f.get("severity") for f in findings)
    words = [
        f"{counts[s]} {one if counts[s] == 1 else many}" for s, (one, many) in SEVERITY_WORDS.items() if counts.get(s)
    ]
    return ", ".join(words) or "none"


def steps_words(steps: Iterable[Any]) -> str:
    """``step 7`` or ``steps 3-5, 9``."""
    nums = {int(v) for v in steps if v is not None}
    return f"{'step' if len(nums) == 1 else 'steps'} {number_ranges(nums)}" if nums else ""


def where(f: Mapping[str, Any]) -> str:
    """``worker 3``, ``workers 0-2``, ``every worker (the whole step)``, ``the trainer (phase update_actor)``.

    A cause of the whole step (scope ``step``) names every worker, whatever ``workers`` lists (the one on the
    step's critical path): its message says "all N workers", and the cell beside it must not say "worker 0"."""
    details = f.get("details") or {}
    workers = f.get("workers") or []
    if details.get("scope") == "phase" or (details.get("phase") and not workers):
        return f"the trainer (phase {details['phase']})" if details.get("phase") else "the trainer"
    replica = f", replica {details['replica']}" if details.get("replica") is not None else ""
    if details.get("scope") == "step":
        return f"every worker (the whole step){replica}"
    if not workers:
        return ""
    one = "worker" if len(workers) == 1 else "workers"
    return f"{one} {number_ranges(workers)}{replica}"


def cause_reference(headline: str, found: Iterable[Mapping[str, Any]]) -> tuple[str, str, str, int] | None:
    """A headline that repeats a cause's message word for word, split around it: the words before (``… because
    of``), the cause named instead (``cause #1 below: stall (cost 19.6 s), worker 0``), the words after, and the cause's
    number in the causes list; None when it repeats none. Why: the stall's 60-word sentence was read three times,
    in the headline, the causes list and (the demo) the live line; the causes list tells it in full, once, and the
    report and the terminal summary both point at it (issue 51)."""
    from otel_verl.analysis.findings.common.step_cause import cause_name

    for i, f in enumerate(found, 1):
        message = str(f.get("message") or "")
        if len(message) < 40 or message not in headline:
            continue
        place, cost = where(f), f" (cost {seconds_words(f['seconds'])})" if f.get("seconds") else ""
        words = f"cause #{i} below: {cause_name(f)}{cost}" + (f", {place}" if place else "")
        head, _, tail = headline.partition(message)
        head = head[: -len("because ")] + "because of " if head.endswith("because ") else head
        return head, words, tail, i
    return None


USUAL_HEADER = "parts' usual"
"""The steps table's "usual" column, so named where it stands: a new user read "usual 2.4 s" above both normal
steps (2.2 s and 2.3 s) as the usual step (issue 51)."""


def usual_words(accounts: Iterable[Mapping[str, Any]], summary: Mapping[str, Any] | None = None) -> str:
    """What the steps table's :data:`USUAL_HEADER` and excess columns are, with the median step beside it: the sum of
    the parts' usual seconds is not the median step (each part's median is taken on its own), and the reader is
    told both, so neither reads as the other. The median is that of the steps judged against (findings.json
    ``summary.median_step_s``; with ``--steps`` the whole run's), else of the shown steps: ``--steps 2`` of a run
    whose step 2 stalled read "the median step took 21.7 s" beside "usually 2.5 s" (issue 51)."""
    judged = (summary or {}).get("median_step_s")
    took = sorted(float(a["duration_s"]) for a in accounts if isinstance(a.get("duration_s"), (int, float)))
    value = float(judged) if isinstance(judged, (int, float)) else float(np.median(took)) if took else None
    median = f"; the median step took {seconds_words(value)}" if value is not None else ""
    return (
        f"{USUAL_HEADER}: the sum of each part's usual seconds in this run (a part's usual is its own median, so the "
        f"sum need not be the median step{median}); excess: took − {USUAL_HEADER}, which holds what the step's "
        "causes cost and whatever its other parts ran over or under their usual"
    )


def trace_link(trace_url: str | None, trace_id: str, span_id: str | None = None) -> str | None:
    """The URL of one trace from a ``--trace-url`` template, else None; with the span the finding names in that
    trace (``span_id``), the template's ``{span_id}`` takes it, and a Jaeger trace URL (``…/trace/{trace_id}``) gets
    ``?uiFind=<span id>``, which Jaeger's UI reads to highlight that span and open its details (issue 51: the link
    opened the trace with nothing marked; tests/backends/test_jaeger_ui.py clicks it in Jaeger's own UI)."""
    if not trace_url:
        return None
    url = trace_url.replace("{trace_id}", trace_id)
    if span_id and "{span_id}" in url:
        return url.replace("{span_id}", span_id)
    parts = urlsplit(url)
    if span_id and JAEGER_TRACE_PATH.search(parts.path) and "uiFind=" not in parts.query:
        query = "&".join(q for q in (parts.query, urlencode({"uiFind": span_id})) if q)
        return urlunsplit(parts._replace(query=query))
    return url


JAEGER_TRACE_PATH = re.compile(r"/trace/[0-9a-fA-F]{16,32}/?$")
"""The path of a trace in Jaeger's UI (``/trace/<id>``): a ``--trace-url`` that takes ``uiFind``."""


def evidence_span(finding: Mapping[str, Any], trace_id: str) -> str | None:
    """The first span a finding's evidence names in ``trace_id`` (findings.json's ``evidence``), else None."""
    return next((e.get("span_id") for e in finding.get("evidence") or [] if e.get("trace_id") == trace_id), None)


def open_step_command(source: str | None, steps: Iterable[Any]) -> str:
    """The command that writes these steps for ui.perfetto.dev: ``otel-verl export-perfetto SRC --steps 7:7 --out
    step7.pftrace`` (Perfetto's protobuf format: every request's lane named), ``otel-verl`` spelled so it runs
    in the user's shell (:mod:`otel_verl.invocation`)."""
    nums = sorted({int(s) for s in steps if s is not None})
    src = shlex.quote(str(source)) if source else "SOURCE"
    if not nums:
        return f"{otel_verl_command()} export-perfetto {src} --out trace.pftrace"
    lo, hi = nums[0], nums[-1]
    name = f"step{lo}" if lo == hi else f"steps{lo}-{hi}"
    return f"{otel_verl_command()} export-perfetto {src} --steps {lo}:{hi} --out {name}.pftrace"


def trace_url_command(source: str | None) -> str:
    """The whole command that analyzes ``source`` again with every trace id linked to the Jaeger the demo's lines
    start: the hint named the flag alone, and not the command that takes it (issue 51)."""
    src = shlex.quote(str(source)) if source else "SOURCE"
    return f"{otel_verl_command()} analyze {src} --trace-url '{JAEGER_TRACE_URL}'"


def missing_parts(summary: Mapping[str, Any]) -> list[str]:
    """What the input lacked, in words: skipped bad lines (with the first), load warnings, steps without
    workers or requests. Empty when the data is whole."""
    out: list[str] = []
    load = summary.get("load") or {}
    bad = int(load.get("bad_lines_skipped") or 0)
    if bad:
        first = (load.get("first_bad_lines") or [None])[0]
        lines = "1 bad line was" if bad == 1 else f"{bad} bad lines were"
        out.append(f"{lines} skipped (--skip-bad-lines)" + (f"; the first: {first}" if first else ""))
    out += [str(w) for w in load.get("warnings") or []]
    gaps = summary.get("missing") or {}
    if gaps.get("steps_without_workers"):
        out.append(f"no worker spans in {steps_words(gaps['steps_without_workers'])}: the rollout there is unseen")
    if gaps.get("steps_without_requests"):
        out.append(f"no request spans in {steps_words(gaps['steps_without_requests'])}")
    return out
