"""scripts/bootstrap.sh tells a first run what it does (issue 51: one line, then ~2 minutes of silence).

The script runs for real, in a copy of the checkout's layout (scripts/bootstrap.sh beside a uv.lock), with a
stand-in ``uv`` first on the PATH that records its arguments and takes a few seconds: what is tested is the
script's own talk (what it says, when uv is told to be quiet), not uv's downloads, which take minutes and ~3 GB.
"""

from __future__ import annotations

import os
import pty
import shutil
import subprocess
import time
from pathlib import Path

from tests.clean_shell import ROOT

STAND_IN_UV = """#!/usr/bin/env bash
echo "$*" >> "$(dirname "$0")/uv.calls"
if [[ -n "${STAND_IN_CACHE_MISS:-}" && " $* " == *" --offline "* ]]; then
    echo "error: hatchling was not found in the cache, and network access is disabled" >&2
    exit 1
fi
sleep 3
"""


def _layout(tmp_path: Path) -> tuple[Path, Path]:
    checkout, tools = tmp_path / "checkout", tmp_path / "bin"
    (checkout / "scripts").mkdir(parents=True)
    tools.mkdir()
    shutil.copy(ROOT / "scripts" / "bootstrap.sh", checkout / "scripts" / "bootstrap.sh")
    (checkout / "uv.lock").write_text("version = 1\n")
    (checkout / ".venv").mkdir()
    (tools / "uv").write_text(STAND_IN_UV)
    (tools / "uv").chmod(0o755)
    return checkout, tools


def _env(tools: Path, compile_bytecode: bool = True, cache_miss: bool = False) -> dict[str, str]:
    env = {**os.environ, "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}", "BOOTSTRAP_HEARTBEAT_S": "1"}
    env.pop("STAND_IN_CACHE_MISS", None)
    env.update({"STAND_IN_CACHE_MISS": "1"} if cache_miss else {})
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return {**env, "PYTHONDONTWRITEBYTECODE": "1"} if compile_bytecode else env


def test_first_run_says_what_it_does_then_a_warm_run_is_silent(tmp_path: Path) -> None:
    checkout, tools = _layout(tmp_path)
    started = time.monotonic()
    first = subprocess.run(
        ["bash", "scripts/bootstrap.sh"], cwd=checkout, env=_env(tools), capture_output=True, text=True, timeout=60
    )
    took = time.monotonic() - started
    assert first.returncode == 0, first.stderr
    lines = first.stderr.splitlines()
    assert first.stdout == ""  # the demo's own output stays on stdout alone
    assert lines[0].startswith("bootstrap: setting up ") and "~3 GB" in first.stderr, lines
    assert any(line.startswith("bootstrap: still installing (") for line in lines), lines  # no terminal: a heartbeat
    assert lines[-1].startswith("bootstrap: .venv ready in "), lines
    assert took < 15, f"the heartbeat kept the caller waiting: {took:.1f} s"
    # issue 51.6: a second clone took minutes where this said "later runs: seconds": it installs from uv's cache in
    # seconds, then compiles ~22,000 files; each step is said, with a heartbeat of its own
    install, compile_ = (tools / "uv.calls").read_text().splitlines()
    assert install.split()[:4] == ["sync", "--frozen", "--extra", "verl"] and "--quiet" in install.split(), install
    assert "--compile-bytecode" not in install.split() and "--compile-bytecode" in compile_.split(), compile_
    said = "\n".join(lines)
    assert "1/2 install" in said and "uv's cache" in said and "2/2 bytecode: compiling" in said, said
    assert any(line.startswith("bootstrap: still compiling (") for line in lines), lines
    assert any(line.startswith("bootstrap: compiled in ") for line in lines), lines
    assert list(checkout.glob(".venv/.otel-verl-bytecode-*")), "no stamp: every run would compile again"

    warm = subprocess.run(
        ["bash", "scripts/bootstrap.sh"], cwd=checkout, env=_env(tools), capture_output=True, text=True, timeout=60
    )
    assert warm.returncode == 0 and warm.stdout == warm.stderr == "", warm.stderr


def test_on_a_terminal_uv_shows_its_progress(tmp_path: Path) -> None:
    checkout, tools = _layout(tmp_path)
    leader, follower = pty.openpty()
    try:
        done = subprocess.run(
            ["bash", "scripts/bootstrap.sh"], cwd=checkout, env=_env(tools, cache_miss=True), stdout=subprocess.DEVNULL,
            stderr=follower, timeout=60,
        )  # fmt: skip
        os.close(follower)
        follower = -1
        said = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the terminal's other end closed: all read
                break
            if not chunk:
                break
            said += chunk
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)
    assert done.returncode == 0
    assert b"~3 GB" in said and b"still installing" not in said, said
    offline, install = (tools / "uv.calls").read_text().splitlines()[:2]  # the cache lacked part: the network
    assert "--offline" in offline.split() and "--offline" not in install.split(), (offline, install)
    assert "--quiet" not in install.split(), install


def test_where_python_writes_bytecode_itself_nothing_is_compiled(tmp_path: Path) -> None:
    """Without PYTHONDONTWRITEBYTECODE Python writes each module's bytecode on first import: the minutes of
    compiling every installed module are skipped, and said so."""
    checkout, tools = _layout(tmp_path)
    done = subprocess.run(
        ["bash", "scripts/bootstrap.sh"], cwd=checkout, env=_env(tools, compile_bytecode=False),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (call,) = (tools / "uv.calls").read_text().splitlines()
    assert "--compile-bytecode" not in call.split(), call
    assert "2/2 bytecode: skipped" in done.stderr, done.stderr
    assert list(checkout.glob(".venv/.otel-verl-lazy-*")), "no stamp: every run would install again"


def test_the_cache_is_tried_first_and_the_network_said(tmp_path: Path) -> None:
    """Issue 51, item 1: with everything in uv's cache a fresh clone's bootstrap still went to pypi.org (the build
    backend) and failed offline; every sync now tries the cache alone first, and says in one line when it cannot."""
    checkout, tools = _layout(tmp_path)
    hit = subprocess.run(
        ["bash", "scripts/bootstrap.sh"], cwd=checkout, env=_env(tools), capture_output=True, text=True, timeout=60
    )
    assert hit.returncode == 0, hit.stderr
    calls = (tools / "uv.calls").read_text().splitlines()
    assert len(calls) == 2 and all("--offline" in c.split() for c in calls), calls  # no network at all
    assert "network" not in hit.stderr, hit.stderr

    checkout, tools = _layout(tmp_path / "miss")
    miss = subprocess.run(
        ["bash", "scripts/bootstrap.sh"], cwd=checkout, env=_env(tools, cache_miss=True),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert miss.returncode == 0, miss.stderr
    said = [line for line in miss.stderr.splitlines() if "network" in line]
    assert said == [
        "bootstrap: uv's cache lacks part of uv.lock: installing from the network (pypi.org and the lock's indexes)"
    ], miss.stderr
    assert "not found in the cache" not in miss.stderr  # uv's own offline error stays unsaid
    offline, install, compile_ = (tools / "uv.calls").read_text().splitlines()  # once said, straight to the network
    assert "--offline" in offline.split() and "--offline" not in install.split() + compile_.split(), (install, compile_)
