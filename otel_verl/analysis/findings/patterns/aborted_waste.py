"""aborted_waste: over-sampled requests aborted once the rest completed: count, tokens and seconds thrown
away per step (the numbers are :func:`otel_verl.analysis.tables.aborted.aborted_per_step`)."""

from __future__ import annotations

import pandas as pd

from otel_verl.analysis.findings.common import kinds
from otel_verl.analysis.findings.common.record import Finding, evidence, fmt_s
from otel_verl.analysis.findings.common.thresholds import Thresholds
from otel_verl.analysis.tables import Tables
from otel_verl.analysis.tables.aborted import aborted_per_step


def find_aborted_waste(t: Tables, th: Thresholds) -> list[Finding]:
    """Over-sampled/aborted requests: count, tokens and seconds thrown away per step."""
    out: list[Finding] = []
    for _, row in aborted_per_step(t).iterrows():
        if row["aborted"] <= 0:
            continue
        frac = float(row["waste_fraction"]) if pd.notna(row["waste_fraction"]) else 0.0
        step = int(row["step"])
        ex = t.requests[((t.requests["step"] == step) & (t.requests["request_status"] == "aborted")).fillna(False)]
        evs = [e for _, x in ex.head(5).iterrows() for e in evidence(x["trace_id"], x["span_id"])]
        out.append(
            Finding(
                kind=kinds.ABORTED_WASTE,
                severity="warning" if frac >= th.aborted_warn_fraction else "info",
                step=step,
                metric="seconds_wasted",
                value=float(row["seconds_wasted"]),
                baseline=float(row["request_seconds"]),
                evidence=evs,
                details={
                    "aborted": int(row["aborted"]),
                    "requests": int(row["requests"]),
                    "tokens_wasted": int(row["tokens_wasted"]),
                    "engine_seconds_wasted": float(row["engine_seconds_wasted"]),
                    "waste_fraction": frac,
                },
                message=f"step {step}: {int(row['aborted'])} of {int(row['requests'])} requests were aborted, "
                f"throwing away {int(row['tokens_wasted'])} tokens and {fmt_s(float(row['seconds_wasted']))} "
                f"of request time ({frac:.0%}; {fmt_s(float(row['engine_seconds_wasted']))} of it in engine calls)",
            )
        )
    return out
