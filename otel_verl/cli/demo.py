"""``otel-verl demo``: a traced multi-turn rollout on the CPU (real verl code, simulated LLM server), then
the analysis of what it recorded."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from otel_verl.analysis.report.presenting import counted
from otel_verl.cli.common import console
from otel_verl.cli.consoles import console as make_console
from otel_verl.cli.heartbeat import Heartbeat
from otel_verl.demo import quiet_logs as demo_quiet
from otel_verl.demo import trackers as demo_trackers
from otel_verl.demo.plants import ENGINE_KEYS, GROWING, NEEDS_REPLICAS, PLANT_STEP, READY_MADE, names

if TYPE_CHECKING:
    from otel_verl.demo.options import DemoOptions, DemoResult


SECONDS_PER_TOKEN_HELP = (
    "Decode seconds per token of a request alone (0.0004: 0.4 ms); 64 rollouts decoding at once on a replica get "
    "about 0.8 ms each."
)
"""Why the arithmetic: the README demo's stall read "the usual 0.818 ms/token" while this said 0.4 ms, with
nothing saying why (issue 51); the simulated engine's shared capacity (``SimServerConfig.capacity``) doubles it
while the step's 64 rollouts decode together, up to 32 at full speed (tests/analysis/test_demo_help.py checks the
figure). The default is said in ms beside the figure: "[default: 0.0004]" beside "0.8 ms" read as a contradiction
(issue 51)."""


def _plant_help() -> str:
    """The names alone; what each plants is docs/trainer-details.md's table (``--plant``'s help was 40 lines of the
    demo's 140 at 80 columns: issue 51)."""
    return (
        f"A ready-made problem (repeat to combine), in step {PLANT_STEP}: {', '.join(READY_MADE)}; from step "
        f"{PLANT_STEP} on: {', '.join(GROWING)}. What each plants: docs/trainer-details.md#planted-problems."
    )


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


ENGINE_PHASES = ("decode", "queue", "before")


def _slow_turns(values: list[str] | None) -> dict[int, tuple[int, float, str]]:
    """``IDX:TURN:SEC[:WHERE]`` options → {prompt index: (turn index, seconds, where)}."""
    out: dict[int, tuple[int, float, str]] = {}
    for value in values or []:
        parts = value.split(":")
        where = parts.pop() if len(parts) == 4 else "decode"
        if where not in ENGINE_PHASES:
            console.print(f"error: --slow-turn {value!r}: WHERE must be one of {', '.join(ENGINE_PHASES)}")
            raise typer.Exit(code=2)
        ((index, turn, seconds),) = _pairs([":".join(parts)], 3, "--slow-turn")
        out[int(index)] = (int(turn), seconds, where)
    return out


def _ready_made(chosen: list[str] | None, engine: str, knobs: bool, steps: int) -> dict[int, dict]:
    """``--plant`` names → ``step_plants`` (exit 2 on an unknown name, or a mix the demo cannot honour)."""
    from otel_verl.demo.plants import ready_made

    if not chosen:
        return {}
    for name in chosen:
        if name not in names():
            console.print(f"error: --plant {name!r}: use {', '.join(names())}")
            raise typer.Exit(code=2)
    if knobs:
        console.print("error: --plant replaces --stall/--slow-turn/--slow-reward/--slow-step: use one or the other")
        raise typer.Exit(code=2)
    plans = ready_made(chosen, steps)
    if engine != "sim" and any(key in ENGINE_KEYS for plan in plans.values() for key in plan):
        console.print(f"error: --plant {' '.join(chosen)} plants in the simulated engine: it needs --engine sim")
        raise typer.Exit(code=2)
    return plans


def _run_with_progress(out: Console, opts: DemoOptions, quiet: bool) -> DemoResult:
    """``run_demo`` with a line per finished step and a spinner meanwhile (both on ``out``), the other libraries'
    output silenced unless not ``quiet`` (:mod:`otel_verl.demo.quiet_logs`)."""
    from otel_verl.demo.runner import run_demo

    # each count named (a newcomer could not read "16×4 requests"): prompts × rollouts each = requests
    shape = f"{counted(opts.prompts, 'prompt')} × {counted(opts.n, 'rollout')} = {opts.prompts * opts.n} requests"
    what = f"{counted(opts.workers, 'worker')}, {shape} a step, trainer {opts.trainer}"
    out.print(f"running {counted(opts.steps, 'traced step')} ({what}); the first takes the longest (Ray, verl start)")
    # what step 1 waits for, named: verl's validation before training is most of it (77 s of ~5 min, issue 51)
    first = "waiting for step 1: Ray and verl start"
    if opts.val_before_train:
        first += ", then verl's validation before training (--no-val-before-train skips it)"
    with (
        out.status(f"{first}…") as status,
        Heartbeat(out, first) as beat,  # a pipe has no spinner: a line every 30 s
        demo_quiet.third_party_quiet(quiet),
    ):

        def on_step(step: int, seconds: float) -> None:
            out.print(f"  step {step}/{opts.steps} done in {seconds:.1f} s")
            doing = f"running step {step + 1} of {opts.steps}" if step < opts.steps else "flushing the spans"
            status.update(f"{doing}…")
            beat.doing(doing)

        return run_demo(replace(opts, on_step=on_step))


SHAPE = "Shape of the run"
PLANT = "Plant a problem for the analyzer to find"


def demo(
    steps: Annotated[int, typer.Option(min=1, help="Training steps to run.")] = 3,
    spool: Annotated[
        Path | None, typer.Option(help="Write the spool here (also when an OTLP endpoint is set).")
    ] = None,
    report: Annotated[
        Path | None, typer.Option(help="Analyzer output dir (default: a folder per run under ./otel-verl-report).")
    ] = None,
    no_report: Annotated[bool, typer.Option("--no-report", help="Skip the analysis after the run.")] = False,
    workers: Annotated[int, typer.Option(min=1, help="AgentLoopWorker actors.", rich_help_panel=SHAPE)] = 2,
    prompts: Annotated[int, typer.Option(min=1, help="Prompts per step.", rich_help_panel=SHAPE)] = 16,
    n: Annotated[int, typer.Option(min=1, help="Rollouts per prompt (rollout.n).", rich_help_panel=SHAPE)] = 4,
    max_turns: Annotated[
        int, typer.Option(min=1, help="Max assistant turns per trajectory.", rich_help_panel=SHAPE)
    ] = 3,
    response_length: Annotated[
        int, typer.Option(min=16, help="rollout.response_length (tokens).", rich_help_panel=SHAPE)
    ] = 256,
    oversample: Annotated[
        float,
        typer.Option(
            min=0.0,
            max=0.9,
            help="Over-sampling: fraction aborted once the rest completed (0 = off).",
            rich_help_panel=SHAPE,
        ),
    ] = 0.0,
    seconds_per_token: Annotated[
        float, typer.Option(min=0.0, help=SECONDS_PER_TOKEN_HELP, rich_help_panel=SHAPE)
    ] = 0.0004,
    stall: Annotated[
        list[str] | None,
        typer.Option(
            metavar="IDX:SEC",
            help="Prompt IDX's first engine call stalls SEC s in the engine (told as a stall).",
            rich_help_panel=PLANT,
        ),
    ] = None,
    slow_turn: Annotated[
        list[str] | None,
        typer.Option(
            metavar="IDX:TURN:SEC",
            help="Extra SEC s on the engine call of prompt IDX's turn index TURN (0-based, as `verl.turn.index`: "
            "1 = the second turn; findings say `turn index 1`). Add `:WHERE` (IDX:TURN:SEC[:WHERE]) for where in "
            "the engine's own account: decode (default), queue (waiting in the engine's queue) or before (before "
            "the engine received the request: a slow hop or load balancer).",
            rich_help_panel=PLANT,
        ),
    ] = None,
    slow_reward: Annotated[
        list[str] | None,
        typer.Option(
            metavar="IDX:SEC", help="Extra SEC s in the rewards of prompt IDX's rollouts.", rich_help_panel=PLANT
        ),
    ] = None,
    slow_step: Annotated[
        int | None,
        typer.Option(metavar="STEP", help="Apply the planted slowness in this step only.", rich_help_panel=PLANT),
    ] = None,
    replicas: Annotated[
        int,
        typer.Option(
            min=1,
            help="Engine replicas (sim or vLLM), behind verl's load balancer (sticky sessions).",
            rich_help_panel=SHAPE,
        ),
    ] = 1,
    replica_capacity: Annotated[
        list[str] | None,
        typer.Option(
            metavar="R:N",
            help="Replica R runs N requests at once, the rest queue in it (a replica imbalance).",
            rich_help_panel=SHAPE,
        ),
    ] = None,
    full_determinism: Annotated[
        bool,
        typer.Option(
            "--full-determinism",
            help="verl's rollout.full_determinism (reproducible runs): every request is named det-{priority}, "
            "the same ids in every step; traced and analysed as with random ids.",
            rich_help_panel=SHAPE,
        ),
    ] = False,
    plant: Annotated[list[str] | None, typer.Option(metavar="NAME", help=_plant_help(), rich_help_panel=PLANT)] = None,
    seed: Annotated[
        int, typer.Option(help="Random seed of the simulated engine and tools.", rich_help_panel=SHAPE)
    ] = 0,
    trainer: Annotated[
        str,
        typer.Option(
            metavar="MODE",
            help="v1-sync (verl's default), v1-colocate-async, v1-separate-async: verl's own V1 trainer class of "
            "that mode (its trainer_mode option) with stand-ins for its GPU work; legacy: RayPPOTrainer's "
            "loop (trainer.use_v1=false), stood in for, around verl's blocking AgentLoopManager.",
        ),
    ] = "v1-sync",
    no_val_before_train: Annotated[
        bool,
        typer.Option(
            "--no-val-before-train",
            help="Skip the validation rollout before step 1 (verl runs one by default; it takes the warm-up).",
        ),
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            help="Also show verl's, Ray's and TransferQueue's own output (hidden: it is not about your run).",
        ),
    ] = False,
    logger: Annotated[
        list[str] | None,
        typer.Option(
            metavar="BACKEND",
            help="verl's trainer.logger backend: console (the default), wandb, mlflow, tensorboard, or another verl "
            "knows (swanlab, clearml, trackio, file and more); repeat for several. Each step's live account "
            "(otel_verl/* metrics, a verdict line on the console) goes there as training runs; OTEL_VERL_LIVE=false "
            "turns the live account off.",
        ),
    ] = None,
    engine: Annotated[
        str,
        typer.Option(
            metavar="sim|vllm",
            help="sim: simulated engine; vllm: verl's real vLLMHttpServer on vLLM's CPU build with a tiny random "
            "model (run through scripts/demo.sh --engine vllm, which installs it).",
        ),
    ] = "sim",
) -> None:
    """Run a traced multi-turn rollout on the CPU: real verl code, simulated LLM server.

    AgentLoopManager → AgentLoopWorker Ray actors → ToolAgentLoop (hermes tool calls, a calculator
    `BaseTool`) → a simulated engine with per-token decode time, shared capacity, heavy-tailed
    lengths and over-sampling aborts; rewards by verl's RewardLoopWorker with GSM8K scoring. Then the
    analyzer writes findings.json, report.html and figures.

    Plant a problem for the analyzer to find (the last panel): `--plant stall`, or by hand `--stall 3:20`
    (prompt 3's rollouts stall 20 s), `--slow-turn 5:1:8`, `--slow-reward 7:5`, `--slow-step 2`.
    """
    from otel_verl.analysis.errors import AnalysisInputError
    from otel_verl.analysis.output_paths import prepare_dir
    from otel_verl.cli.analyze import run_analysis
    from otel_verl.demo.runner import DemoOptions, check_options

    step_plants = _ready_made(plant, engine, knobs=bool(stall or slow_turn or slow_reward or slow_step), steps=steps)
    needed = max((NEEDS_REPLICAS.get(name, 1) for name in plant or []), default=1)
    if replicas < needed:  # a slow replica needs a peer to be slower than
        console.print(f"--plant {' '.join(plant or [])}: running {needed} engine replicas (--replicas {needed})")
        replicas = needed
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
        slow_turn=_slow_turns(slow_turn),
        slow_reward={int(i): s for i, s in _pairs(slow_reward, 2, "--slow-reward")},
        slow_step=slow_step,
        step_plants=step_plants,
        replicas=replicas,
        replica_capacity={int(r): int(c) for r, c in _pairs(replica_capacity, 2, "--replica-capacity")},
        spool=str(spool) if spool else None,
        trainer=trainer,
        val_before_train=not no_val_before_train,
        engine=engine,
        loggers=tuple(logger) if logger else ("console",),
        full_determinism=full_determinism,
    )
    try:
        check_options(opts)
    except ValueError as exc:
        console.print(f"error: {exc}")
        raise typer.Exit(code=2) from None
    # every line the user reads, on stdout (the real one: third_party_quiet redirects sys.stdout to a filter while
    # verl runs, which would drop the step lines); errors alone on stderr
    out = make_console(file=sys.stdout)
    started = time.monotonic()
    result = _run_with_progress(out, opts, quiet=not (verbose or demo_quiet.verbose()))
    out.print(  # the whole wait, as the user's clock saw it (run_demo's own wall time left start-up out: issue 51)
        f"[bold]{counted(result.steps, 'step')}[/] in {time.monotonic() - started:.1f} s (the whole run: start-up, "
        f"{'verl validation, ' if opts.val_before_train else ''}shut-down included), "
        # verl's num_turns counts a trajectory's messages (prompt, answers, tool results), not its turns: said as
        # what it counts, without verl's name for it, which a newcomer read as turns (issue 51)
        f"{result.requests_per_step} requests a step, {counted(result.turns, 'message')} in all "
        "(prompts, answers, tool results)",
        soft_wrap=True,  # one line, whatever the width: a pipe or a test reads it whole
    )
    if result.engine_launch_seconds is not None:
        out.print(f"vLLM server(s) launched in {result.engine_launch_seconds:.0f} s")
    for tracker, place in result.trackers.items():  # --logger's backends: where each wrote
        out.print(f"{tracker} wrote to {place}", markup=False, highlight=False, soft_wrap=True)
        if hint := demo_trackers.how_to_read(tracker, place):
            out.print(f"  {hint}", markup=False, highlight=False, soft_wrap=True)
    if result.spool_dir is None:
        endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        out.print(f"traces sent to {endpoint or 'nowhere (OTEL_SDK_DISABLED)'}")
        return
    out.print(f"traces: [bold]{result.spool_dir}[/]")
    if no_report:
        return
    from otel_verl.cli.jaeger_hint import see_in_jaeger
    from otel_verl.invocation import otel_verl_command

    out = report or Path("otel-verl-report") / result.run_id
    print("analyzing the traces: findings, report.html and figures (the summary follows)", flush=True)
    try:
        run_analysis(result.spool_dir, out)
    except (AnalysisInputError, OSError) as exc:
        why = f"{exc.filename or ''}: {exc.strerror or exc}" if isinstance(exc, OSError) else str(exc)
        print(
            f"error: analysis failed: {why} (the traces are kept in {result.spool_dir}; "
            f"analyze them with: {otel_verl_command()} analyze {result.spool_dir} --out DIR)",
            file=sys.stderr,
        )
        raise typer.Exit(code=2) from None
    print("\n".join(see_in_jaeger(Path(result.spool_dir))))
