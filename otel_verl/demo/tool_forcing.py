"""Demo only: a vLLM logits processor that makes the tiny random model call the demo's tool.

A random-weight model almost never writes a well-formed hermes tool call, so without help the real-engine
demo would show no ``execute_tool`` span. This processor (vLLM 0.24's V1 ``LogitsProcessor`` API, loaded by
the engine from ``engine_kwargs.vllm.logits_processors``) decides per request, from its prompt:

- first turn of an even-numbered question: the output is forced, token by token, to
  ``<tool_call>{"name": "calculator", "arguments": {"expression": "a+b"}}</tool_call>`` and the end of turn,
  so verl's ``HermesToolParser`` finds the call and ``ToolAgentLoop`` runs the demo's calculator;
- the turn after a tool response: forced to ``The answer is #### <result>`` (GSM8K's answer format, so the
  reward is real) and the end of turn;
- any other turn (odd-numbered questions): sampled freely from the model, with the end-of-turn token
  suppressed so it runs to the response length. These are the long requests that ``--oversample`` aborts
  in flight: the forced ones finish first.

Only the logits change; the engine, its scheduler, verl's parser and tool code run as they would.
Never use this outside the demo.
"""

from __future__ import annotations

import re
from typing import Any

import torch
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality

QUESTION = re.compile(r"Question #(\d+): Tom has (\d+) apples and buys (\d+) apples more")
TOOL_RESPONSE = re.compile(r"<tool_response>\s*(.*?)\s*</tool_response>", re.S)
FQCN = f"{__name__}:DemoToolCalls"
"""What ``engine_kwargs.vllm.logits_processors`` names (vLLM's ``module:Class`` form)."""

FREE = None
"""A request's plan when it is sampled freely (end of turn suppressed)."""


def plan_text(prompt: str) -> str | None:
    """The text a turn is forced to, or None for free sampling (pure: the rule of this module's docstring)."""
    responses = TOOL_RESPONSE.findall(prompt)
    if responses:
        value = responses[-1].strip()
        number = float(value) if re.fullmatch(r"-?\d+(\.\d+)?", value) else None
        answer = str(int(number)) if number is not None and number.is_integer() else value
        return f"The answer is #### {answer}"
    questions = QUESTION.findall(prompt)
    if not questions:
        return None
    index, a, b = questions[-1]
    if int(index) % 2:
        return None
    return '<tool_call>{"name": "calculator", "arguments": {"expression": "' + f"{a}+{b}" + '"}}</tool_call>'


class DemoToolCalls(LogitsProcessor):
    """Forces the planned tokens of each request (see the module docstring); built once per engine."""

    def __init__(self, vllm_config: Any, device: torch.device, is_pin_memory: bool) -> None:
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(vllm_config.model_config.tokenizer)
        self.end_of_turn = int(self.tokenizer.eos_token_id)
        self.plans: dict[int, tuple[list[int] | None, list[int]]] = {}
        """batch row → (forced token ids, or FREE; the request's live list of output token ids)."""

    def is_argmax_invariant(self) -> bool:
        return False  # it changes the argmax: greedy (validation) requests are forced too

    def _plan(self, prompt_ids: list[int] | None) -> list[int] | None:
        if not prompt_ids:
            return FREE
        text = plan_text(self.tokenizer.decode(prompt_ids, skip_special_tokens=False))
        if text is None:
            return FREE
        return [*self.tokenizer.encode(text, add_special_tokens=False), self.end_of_turn]

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        if batch_update is None:
            return
        for row in batch_update.removed:
            self.plans.pop(row, None)
        for row, _params, prompt_ids, output_ids in batch_update.added:
            self.plans[row] = (self._plan(prompt_ids), output_ids)
        for a, b, direction in batch_update.moved:
            moved_a, moved_b = self.plans.pop(a, None), self.plans.pop(b, None)
            if moved_a is not None:
                self.plans[b] = moved_a
            if direction == MoveDirectionality.SWAP and moved_b is not None:
                self.plans[a] = moved_b

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        for row, (forced, output_ids) in self.plans.items():
            if row >= logits.shape[0]:
                continue
            if forced is FREE:
                logits[row, self.end_of_turn] = float("-inf")
                continue
            position = len(output_ids)
            if position < len(forced):
                token = forced[position]
                logits[row, :] = float("-inf")
                logits[row, token] = 0.0
        return logits
