"""``otel-verl`` command line: thin layer over the library."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from otel_verl.analysis import commands as analysis_commands

app = typer.Typer(
    name="otel-verl",
    help=(
        "OpenTelemetry tracing for multi-turn RL training with verl.\n\n"
        "Trace a real run: add `+ray_kwargs.ray_init.runtime_env.worker_process_setup_hook="
        "otel_verl.activate.setup` to the verl command line and set OTEL_EXPORTER_OTLP_ENDPOINT "
        "(or nothing: spans then go to ./otel-verl-spool). Try it without a GPU: `otel-verl demo`."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
)
console = Console(stderr=True)


def _pairs(values: list[str] | None, arity: int, option: str) -> list[tuple[float, ...]]:
    out = []
    for value in values or []:
        parts = value.split(":")
        try:
            if len(parts) != arity:
                raise ValueError
            out.append(tuple(float(p) for p in parts))
        except ValueError:
            console.print(f"error: {option} {value!r}: expected {':'.join(['N'] * arity)}")
            raise typer.Exit(code=2) from None
    return out


@app.command()
def demo(
    steps: Annotated[int, typer.Option(min=1, help="Training steps to run.")] = 3,
    spool: Annotated[
        Path | None, typer.Option(help="Write the spool here (also when an OTLP endpoint is set).")
    ] = None,
    report: Annotated[
        Path | None, typer.Option(help="Analyzer output dir (default: `./otel-verl-report/<run>`).")
    ] = None,
    no_report: Annotated[bool, typer.Option("--no-report", help="Skip the analysis after the run.")] = False,
    workers: Annotated[int, typer.Option(min=1, help="AgentLoopWorker actors.")] = 2,
    prompts: Annotated[int, typer.Option(min=1, help="Prompts per step.")] = 16,
    n: Annotated[int, typer.Option(min=1, help="Rollouts per prompt (rollout.n).")] = 4,
    max_turns: Annotated[int, typer.Option(min=1, help="Max assistant turns per trajectory.")] = 3,
    response_length: Annotated[int, typer.Option(min=16, help="rollout.response_length (tokens).")] = 256,
    oversample: Annotated[
        float, typer.Option(min=0.0, max=0.9, help="Over-sampling: fraction aborted once the rest completed (0 = off).")
    ] = 0.0,
    seconds_per_token: Annotated[float, typer.Option(min=0.0, help="Simulated decode time per token.")] = 0.0004,
    stall: Annotated[
        list[str] | None, typer.Option(help="IDX:SEC — sample IDX's first engine call stalls SEC s (idle gap).")
    ] = None,
    slow_turn: Annotated[
        list[str] | None,
        typer.Option(
            help="IDX:TURN:SEC — extra SEC s on the engine call of sample IDX's turn index TURN (0-based, as "
            "`verl.turn.index`: 1 = the second turn; findings say `turn index 1`)."
        ),
    ] = None,
    slow_reward: Annotated[
        list[str] | None, typer.Option(help="IDX:SEC — extra SEC s in that sample's reward.")
    ] = None,
    slow_step: Annotated[int | None, typer.Option(help="Apply the planted slowness in this step only.")] = None,
    seed: Annotated[int, typer.Option(help="Random seed of the simulated engine and tools.")] = 0,
    trainer: Annotated[
        str, typer.Option(help="legacy: RayPPOTrainer-style blocking rollout; v1: V1 trainer's TransferQueue path.")
    ] = "legacy",
    val_before_train: Annotated[
        bool, typer.Option(help="A validation rollout before step 1, as verl does by default (takes the warm-up).")
    ] = True,
    engine: Annotated[
        str,
        typer.Option(
            help="sim: simulated engine; vllm: verl's real vLLMHttpServer on vLLM's CPU build with a tiny random "
            "model (run through scripts/demo.sh --engine vllm, which installs it)."
        ),
    ] = "sim",
    replicas: Annotated[int, typer.Option(min=1, help="vLLM server replicas behind verl's load balancer.")] = 1,
) -> None:
    """Run a traced multi-turn rollout on the CPU: real verl code, simulated LLM server.

    AgentLoopManager → AgentLoopWorker Ray actors → ToolAgentLoop (hermes tool calls, a calculator
    `BaseTool`) → a simulated engine with per-token decode time, shared capacity, heavy-tailed
    lengths and over-sampling aborts; rewards by verl's RewardLoopWorker with GSM8K scoring. Then the
    analyzer writes findings.json, report.html and figures.

    Plant a problem for the analyzer to find: `--stall 3:20` (sample 3 stalls 20 s: a straggler
    worker with an idle gap), `--slow-turn 5:1:8` (8 s more on turn index 1, the second turn, of
    sample 5), `--slow-reward 7:5`, `--slow-step 2`.
    """
    from otel_verl.analysis.errors import AnalysisInputError
    from otel_verl.analysis.outputs import prepare_dir
    from otel_verl.demo.runner import DemoOptions, run_demo

    if trainer not in ("legacy", "v1"):
        console.print(f"error: --trainer {trainer!r}: use legacy or v1")
        raise typer.Exit(code=2)
    if engine not in ("sim", "vllm"):
        console.print(f"error: --engine {engine!r}: use sim or vllm")
        raise typer.Exit(code=2)
    if report is not None and not no_report:
        try:  # a bad report path found after minutes of rollout would waste the run
            prepare_dir(report, "--report")
        except AnalysisInputError as exc:
            print(f"error: {exc}", file=sys.stderr)
            raise typer.Exit(code=2) from None
    opts = DemoOptions(
        steps=steps,
        workers=workers,
        prompts=prompts,
        n=n,
        max_turns=max_turns,
        response_length=response_length,
        oversample=oversample,
        seconds_per_token=seconds_per_token,
        seed=seed,
        stall={int(i): s for i, s in _pairs(stall, 2, "--stall")},
        slow_turn={int(i): (int(t), s) for i, t, s in _pairs(slow_turn, 3, "--slow-turn")},
        slow_reward={int(i): s for i, s in _pairs(slow_reward, 2, "--slow-reward")},
        slow_step=slow_step,
        spool=str(spool) if spool else None,
        trainer=trainer,
        ray_cpus=workers + 2 if trainer == "v1" else None,
        val_before_train=val_before_train,
        engine=engine,
        replicas=replicas,
    )
    with console.status(f"running {steps} traced steps on {workers} workers ({prompts}×{n} requests/step)…"):
        result = run_demo(opts)
    console.print(
        f"[bold]{result.steps} steps[/] in {result.wall_seconds:.1f} s "
        f"(step times: {', '.join(f'{s:.1f}s' for s in result.step_seconds)}), "
        f"{result.requests_per_step} requests/step, {result.turns} turns"
    )
    if result.engine_launch_seconds is not None:
        console.print(f"vLLM server(s) launched in {result.engine_launch_seconds:.0f} s")
    if result.spool_dir is None:
        endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        console.print(f"traces sent to {endpoint or 'nowhere (OTEL_SDK_DISABLED)'}")
        return
    console.print(f"traces: [bold]{result.spool_dir}[/]")
    if no_report:
        return
    out = report or Path("otel-verl-report") / result.run_id
    try:
        analysis_commands.run_analysis(result.spool_dir, out)
    except (AnalysisInputError, OSError) as exc:
        why = f"{exc.filename or ''}: {exc.strerror or exc}" if isinstance(exc, OSError) else str(exc)
        print(
            f"error: analysis failed: {why} (the traces are kept in {result.spool_dir}; "
            f"analyze them with: otel-verl analyze {result.spool_dir} --out DIR)",
            file=sys.stderr,
        )
        raise typer.Exit(code=2) from None


@app.command()
def replay(
    spool: Annotated[Path, typer.Argument(help="Spool directory (or one .jsonl file) to send.")],
    endpoint: Annotated[str | None, typer.Option(help="OTLP endpoint (default: OTEL_EXPORTER_OTLP_ENDPOINT).")] = None,
    protocol: Annotated[
        str | None, typer.Option(help="grpc | http/protobuf (default: OTEL_EXPORTER_OTLP_PROTOCOL or grpc).")
    ] = None,
    skip_bad_lines: Annotated[bool, typer.Option(help="Count and skip unparsable lines instead of stopping.")] = False,
    ignore_journal: Annotated[
        bool,
        typer.Option(help="Send every span, also those the delivery journal lists (e.g. into another backend)."),
    ] = False,
) -> None:
    """Send a spool to any OTLP endpoint (a collector, Jaeger, Tempo), each span once.

    Spans the live exporter (or an earlier replay) delivered are listed in the run's delivery journal
    (`<run>/.delivery/`) and skipped, so replaying twice sends nothing the second time.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from otel_verl.export.replay import ReplayError
    from otel_verl.export.replay import replay as do_replay

    try:
        with Progress(
            TextColumn("replaying"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("spans"),
            console=console,
            transient=True,
        ) as bar:
            task = bar.add_task("replay", total=None)
            stats = do_replay(
                spool,
                endpoint,
                protocol,
                skip_bad_lines,
                progress=lambda k: bar.advance(task, k),
                ignore_journal=ignore_journal,
            )
    except ReplayError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise typer.Exit(code=2) from None
    notes = []
    if stats.already_delivered:
        notes.append(f"{stats.already_delivered} already delivered (delivery journal)")
    if stats.duplicates:
        notes.append(f"{stats.duplicates} duplicates sent once")
    if stats.skipped_lines:
        notes.append(f"{stats.skipped_lines} bad lines skipped")
    extra = f"; {', '.join(notes)}" if notes else ""
    console.print(f"sent {stats.sent} of {stats.spans} spans ({stats.lines} lines from {stats.files} files){extra}")
    if stats.sent == 0 and stats.spans:
        console.print("nothing to send: every span was already delivered")
    if stats.journal_failed:
        print(
            f"warning: {stats.journal_failed} sent spans could not be journaled (read-only spool?); "
            "a later replay would send them again",
            file=sys.stderr,
        )


analysis_commands.register(app)


def main() -> None:  # pragma: no cover - console entry
    app()
