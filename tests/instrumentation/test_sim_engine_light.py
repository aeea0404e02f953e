"""The simulated engine's actor stays light: it answers with verl's ``TokenOutput`` and tokenizes as the demo's
tokenizer does, without importing verl or transformers in its own process (each cost a demo run ~20 s and ~5 s of
CPU there: torch, tensordict)."""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from otel_verl.demo.model import EngineTokenizer, build_tokenizer, write_model_dir
from otel_verl.demo.sim_server import TokenReply


def test_an_engine_process_imports_neither_verl_nor_torch(tmp_path: Path) -> None:
    model = write_model_dir(tmp_path / "model")
    code = textwrap.dedent(
        f"""
        import sys
        import otel_verl.activate
        otel_verl.activate.setup()  # as Ray runs it in every worker process
        from otel_verl.demo.sim_server import SimLLMServer, SimServerConfig, TokenReply
        server = SimLLMServer(SimServerConfig(), {str(model)!r})
        assert server._token_output is TokenReply
        print(sorted(m for m in ("verl", "torch", "transformers") if m in sys.modules))
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


def test_a_reply_arrives_as_verls_token_output() -> None:
    pytest.importorskip("verl")
    from verl.workers.rollout.replica import TokenOutput

    fields = {"token_ids": [5, 6, 7], "stop_reason": "aborted", "num_preempted": 0, "extra_fields": {"global_steps": 3}}
    arrived = pickle.loads(pickle.dumps(TokenReply(**fields)))
    assert isinstance(arrived, TokenOutput)
    assert arrived == TokenOutput(**fields)


def test_the_engines_tokenizer_is_the_demos(tmp_path: Path) -> None:
    model = write_model_dir(tmp_path / "model")
    engine, demo = EngineTokenizer(model), build_tokenizer()
    messages = [
        {"role": "user", "content": "Question 17: what is 3 + 4 ? Let's think . ok , fine…"},
        {"role": "assistant", "content": 'x <tool_call>{"name": "calc"}</tool_call>'},
        {"role": "tool", "content": "7"},
    ]
    text = demo.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    ids = demo.encode(text, add_special_tokens=False)
    assert engine.encode(text) == ids
    assert engine.decode(ids) == demo.decode(ids) == text
    assert engine.eos_token_id == demo.eos_token_id
