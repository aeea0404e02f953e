"""Demo only: a vLLM logits processor that makes the tiny random model call the demo's tool.

A random-weight model almost never writes a well-formed hermes tool call, so without help the real-engine
demo would show no ``execute_tool`` span. This processor (vLLM 0.24's V1 ``LogitsProcessor`` API, loaded by
the engine from ``engine_kwargs.vllm.logits_processors``) decides per request, from its prompt:

- first turn of an even-numbered question: the output is forced, token by token, to
  ``<tool_call>{"name": "calculator", "arguments": {"expression": "a+b"}}</tool_call>`` and the end of turn,
  so verl's ``HermesToolParser`` finds the call and ``ToolAgentLoop`` runs the demo's calculator;
- the turn after a tool response: forced to ``The answer is #### <result>`` (GSM8K's answer format, so the
  reward is real) and the end of turn;
- any other turn (odd-numbered questions): sampled freely from the model, its end-of-turn token
  suppressed until a length that cycles through :data:`FREE_LENGTHS` (then forced), so requests end at
  spread-out times: the long ones are still decoding when ``--oversample`` aborts in flight (with equal
  lengths, a batch's requests all finish in the same engine step and nothing is left to abort).

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

FREE_LENGTHS = (24, 64, 104, 144)
"""Tokens the k-th freely sampled request runs to (k cycling); past the response length it is truncated."""


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
        self.plans: dict[int, tuple[list[int] | int, list[int]]] = {}
        """batch row → (forced token ids, or the length a free request runs to; its live output token ids)."""
        self.free_requests = 0

    def is_argmax_invariant(self) -> bool:
        return False  # it changes the argmax: greedy (validation) requests are forced too

    def _plan(self, prompt_ids: list[int] | None) -> list[int] | int:
        text = plan_text(self.tokenizer.decode(prompt_ids, skip_special_tokens=False)) if prompt_ids else None
        if text is None:
            self.free_requests += 1
            return FREE_LENGTHS[(self.free_requests - 1) % len(FREE_LENGTHS)]
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
        for row, (plan, output_ids) in self.plans.items():
            if row >= logits.shape[0]:
                continue
            position = len(output_ids)
            if isinstance(plan, int):  # free: no end of turn before the planned length, then only that
                if position + 1 < plan:
                    logits[row, self.end_of_turn] = float("-inf")
                    continue
                token = self.end_of_turn
            elif position < len(plan):
                token = plan[position]
            else:
                continue
            logits[row, :] = float("-inf")
            logits[row, token] = 0.0
        return logits
