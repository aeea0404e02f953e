"""Aborted requests per step: count, tokens and seconds thrown away (the aborted figure and the
``aborted_waste`` finding both read it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

if TYPE_CHECKING:
    from otel_verl.analysis.tables import Tables


def aborted_per_step(t: Tables) -> pd.DataFrame:
    """Per step: aborted requests, their tokens and seconds, and the share of request-seconds they used."""
    r = t.requests
    cols = [
        "step",
        "requests",
        "aborted",
        "tokens_wasted",
        "seconds_wasted",
        "engine_seconds_wasted",
        "request_seconds",
        "waste_fraction",
    ]
    r = r[r["step"].notna()] if len(r) else r
    if r.empty:
        return pd.DataFrame(columns=cols)
    ab = r["request_status"] == "aborted"
    tokens = pd.to_numeric(r["response_tokens"], errors="coerce")
    # our engine calls' tokens and seconds: vLLM makes no llm_request for an aborted request, so the call in
    # flight at the abort is known only from our text_completion span (its tokens so far)
    eng = t.events.loc[(t.events["kind"] == "engine").to_numpy(), ["output_tokens", "request_span", "duration"]]
    out_tok = pd.to_numeric(eng["output_tokens"], errors="coerce").groupby(eng["request_span"]).sum()
    eng_s = eng["duration"].groupby(eng["request_span"]).sum()
    tokens = tokens.fillna(r["request_row"].map(out_tok)).fillna(0)
    df = pd.DataFrame(
        {
            "step": r["step"],
            "ab": ab,
            "tok": tokens.where(ab, 0),
            "sec": r["duration"].where(ab, 0),
            "eng": r["request_row"].map(eng_s).fillna(0).where(ab, 0),
            "dur": r["duration"],
        }
    )
    g = df.groupby("step")
    out = pd.DataFrame(
        {
            "requests": g.size(),
            "aborted": g["ab"].sum(),
            "tokens_wasted": g["tok"].sum(),
            "seconds_wasted": g["sec"].sum(),
            "engine_seconds_wasted": g["eng"].sum(),
            "request_seconds": g["dur"].sum(),
        }
    )
    out["waste_fraction"] = out["seconds_wasted"] / out["request_seconds"].where(out["request_seconds"] > 0)
    return out.reset_index()[cols]
