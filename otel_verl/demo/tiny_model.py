"""A tiny real model for vLLM on a CPU: a random-weight Qwen2 and a trained byte-level BPE, made here.

Nothing comes from a hub. The model is small enough to serve at ~100 tokens/s on two busy cores and keeps
what vLLM's CPU attention backend needs (a head size it has kernels for: 32). The tokenizer is a byte-level
BPE trained with ``tokenizers`` on text made here (the demo's questions, hermes tool calls, answers), with
ChatML and ``<tool_call>`` special tokens and the same chat template as the simulated demo's
(:mod:`otel_verl.demo.model`), so verl's ``ToolAgentLoop`` and ``HermesToolParser`` run unchanged.

The directory is cached under ``${OTEL_VERL_CACHE:-~/.cache/otel_verl}/models/<name>``; a new recipe gets a
new name, so a stale cache is never reused.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from otel_verl.demo.model import CHAT_TEMPLATE, SPECIAL_TOKENS

RECIPE = "tiny-qwen2-h64-l2-d32-bpe512-v1"
"""Cache key: change it whenever anything below changes what is written."""

VOCAB_SIZE = 512
HIDDEN_SIZE = 64
LAYERS = 2
HEAD_DIM = 32
"""vLLM's CPU attention backend has kernels for head sizes 32, 64, 80, …; 16 is refused."""
MAX_POSITIONS = 2048


def cache_dir() -> Path:
    return Path(os.environ.get("OTEL_VERL_CACHE") or Path.home() / ".cache" / "otel_verl") / "models"


def training_text() -> list[str]:
    """What the tokenizer learns from: the demo's own conversations, so they tokenise compactly."""
    lines = []
    for i in range(64):
        a, b = 3 + (i * 7) % 40, 5 + (i * 11) % 50
        lines.append(f"Question #{i}: Tom has {a} apples and buys {b} apples more. How many apples?")
        lines.append('<tool_call>{"name": "calculator", "arguments": {"expression": "' + f"{a}+{b}" + '"}}</tool_call>')
        lines.append(f"<tool_response>\n{a + b}\n</tool_response>")
        lines.append(f"Thinking step by step. The answer is #### {a + b}")
    lines.append("You may call tools. Available tools: calculator evaluates an arithmetic expression.")
    return lines


def build_tokenizer():
    """A byte-level BPE (every byte stays representable) with ChatML and hermes special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(training_text(), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=SPECIAL_TOKENS[1:],
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def _write(path: Path, seed: int) -> None:
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    tokenizer = build_tokenizer()
    tokenizer.save_pretrained(path)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=HIDDEN_SIZE,
        intermediate_size=2 * HIDDEN_SIZE,
        num_hidden_layers=LAYERS,
        num_attention_heads=HIDDEN_SIZE // HEAD_DIM,
        num_key_value_heads=HIDDEN_SIZE // HEAD_DIM,
        head_dim=HEAD_DIM,
        max_position_embeddings=MAX_POSITIONS,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.convert_tokens_to_ids("<|im_start|>"),
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        torch_dtype="float32",
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.save_pretrained(path)
    GenerationConfig(eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id).save_pretrained(path)
    (path / "otel_verl_recipe.json").write_text(json.dumps({"recipe": RECIPE, "seed": seed}))


def ensure_tiny_model(root: str | Path | None = None, seed: int = 0) -> Path:
    """The model directory (made once, then reused): config, safetensors weights, tokenizer, chat template."""
    path = Path(root) if root is not None else cache_dir() / f"{RECIPE}-seed{seed}"
    if (path / "otel_verl_recipe.json").exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{path.name}-", dir=path.parent))
    try:
        _write(staging, seed)
        try:
            staging.rename(path)  # atomic: a concurrent maker's directory wins, ours is dropped
        except OSError:
            if not (path / "otel_verl_recipe.json").exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return path
