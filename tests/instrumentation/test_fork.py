"""One provider per process: a forked child builds its own, never writes through the parent's."""

from __future__ import annotations

import json
import os

from otel_verl.export import provider, tracing
from tests.process_state import reset_tracing


def test_child_after_fork_gets_its_own_provider(tmp_path, monkeypatch):
    monkeypatch.setenv("OTEL_VERL_SPOOL", "true")
    monkeypatch.setenv("OTEL_VERL_SPOOL_DIR", str(tmp_path))
    monkeypatch.setenv("OTEL_VERL_RUN_ID", "forked")
    reset_tracing()
    parent = provider.setup_tracing("reward")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        try:
            inherited = tracing.get_state()
            child = provider.setup_tracing("reward")
            with tracing.tracer().start_as_current_span("child-span"):
                pass
            provider.shutdown_tracing()
            os.write(write, json.dumps([inherited is None, child is not parent, child.pid]).encode())
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    inherited_none, new_state, child_pid = json.loads(os.read(read, 1000))
    assert inherited_none and new_state and child_pid != os.getpid()
    assert tracing.get_state() is parent  # the parent's state is untouched
    files = {p.name for p in (tmp_path / "forked" / "no_step").glob("*.jsonl")}
    assert files == {f"reward_{child_pid}.jsonl"}  # the child wrote its own file
    reset_tracing()
