"""``import-legacy``: the seed's SGLangLogManager logs → otel_verl spans in a spool.

Seed lines are ``{"timestamp": <event END, ISO>, "event", "duration_sec", "extra", "workid", "step", ...}``
in ``step_<n>/worker_<rank>.jsonl``. Each becomes a span of the contract (start = end - duration),
keeping its whole line (``verl.legacy.line``) so ``export-legacy`` gives back every field; step, gen
phase and worker spans are synthesized around them. Unknown events are kept as generic spans named
after the event, with ``verl.event.origin``. The work is done file by file, in parallel, by
:mod:`otel_verl.analysis.read.seed.convert`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from otel_verl.analysis.errors import AnalysisInputError
from otel_verl.analysis.output_paths import prepare_dir, writing
from otel_verl.analysis.read.progress import Bar, interactive
from otel_verl.analysis.read.seed import convert
from otel_verl.analysis.read.seed.log_file import OTLP_HINT, VALIDATION_PREFIX, parse_ts
from otel_verl.export.spool import make_private_dirs


def import_legacy(
    logdir: str | Path,
    spool: str | Path | None = None,
    run: str = "legacy",
    skip_bad_lines: bool = False,
    endpoint: str | None = None,
    protocol: str | None = None,
    stats: Any = None,
) -> int:
    """Convert LOGDIR into ``<spool>/<run>/…`` and/or send it to an OTLP ``endpoint``; returns spans converted.

    Sending reuses ``otel-verl replay``'s senders (gRPC or OTLP/HTTP protobuf, ``OTEL_EXPORTER_OTLP_*``
    headers and certificates), one ExportTraceServiceRequest per spool line's worth of spans.
    """
    if spool is None and endpoint is None:
        raise AnalysisInputError("import-legacy needs --spool DIR and/or --endpoint URL")
    if spool is not None:
        try:  # missing directories 0700, as the live spool's (prepare_dir then names any problem)
            make_private_dirs(Path(spool))
        except OSError:
            pass
        prepare_dir(spool, "--spool")
    total = sum(p.stat().st_size for p in Path(logdir).rglob("*.jsonl")) if Path(logdir).is_dir() else 0
    with Bar(interactive() and total > 20_000_000, "reading seed logs", total, "bytes") as bar:
        if endpoint is not None:  # the lines come back to be sent (and written, with --spool)
            results, steps = convert.convert_dir(logdir, run, skip_bad_lines, stats, advance=bar.advance)
            send_documents(convert.documents(results, steps), endpoint, protocol)
        else:  # the workers write the spool themselves
            results, steps = convert.convert_dir(
                logdir,
                run,
                skip_bad_lines,
                stats,
                advance=bar.advance,
                spool=Path(spool),  # type: ignore[arg-type]
            )
    if spool is not None:
        with writing(Path(spool) / run):
            return convert.write_spool(results, steps, Path(spool), run)
    return sum(r.spans for r in results) + len(steps)


def send_documents(documents: list[bytes], endpoint: str, protocol: str | None = None) -> int:
    """Send OTLP/JSON lines over OTLP; a refusing or unreachable endpoint is one :class:`AnalysisInputError`."""
    from otel_verl.export import replay

    try:
        endpoint, protocol = replay.resolve_endpoint(endpoint, protocol)
        send = replay.make_sender(endpoint, protocol)
        sent = 0
        for doc in documents:
            request = replay.parse_line(doc.decode())
            send(request)
            sent += replay.count_spans(request)
    except replay.ReplayError as exc:
        raise AnalysisInputError(str(exc)) from None
    except Exception as exc:  # grpc.RpcError, requests errors: the endpoint's problem, not a traceback
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        raise AnalysisInputError(f"{endpoint}: export failed ({type(exc).__name__}: {first})") from None
    return sent


__all__ = ["OTLP_HINT", "VALIDATION_PREFIX", "import_legacy", "parse_ts", "send_documents"]
