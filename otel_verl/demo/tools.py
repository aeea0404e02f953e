"""A real ``BaseTool`` subclass for the demo: a safe arithmetic calculator with tool-like latency."""

from __future__ import annotations

import ast
import asyncio
import operator
import random
from typing import Any
from uuid import uuid4

from verl.tools.base_tool import BaseTool
from verl.tools.schemas import ToolResponse

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}

TOOL_SCHEMA = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluate an arithmetic expression with + - * /.",
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string", "description": "e.g. 3+4*2"}},
            "required": ["expression"],
        },
    },
}


def evaluate(expression: str) -> float:
    """Arithmetic only: no names, calls or attributes."""

    def walk(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -walk(node.operand)
        raise ValueError(f"unsupported expression: {expression!r}")

    return walk(ast.parse(expression, mode="eval"))


class CalculatorTool(BaseTool):
    """Latency: log-normal around ``config.median_latency`` seconds (default 20 ms)."""

    def __init__(self, config: dict, tool_schema: Any) -> None:
        super().__init__(config, tool_schema)
        self.median_latency = float(config.get("median_latency", 0.02))
        self.rng = random.Random(config.get("seed", 0))
        self.extra_latency: dict[str, float] = {}

    async def create(self, instance_id: str | None = None, **kwargs: Any) -> tuple[str, ToolResponse]:
        """``create_kwargs={"extra_latency": s}`` (verl's per-sample ``tools_kwargs``): a planted slow call."""
        instance_id = instance_id or uuid4().hex
        extra = float((kwargs.get("create_kwargs") or {}).get("extra_latency", 0.0))
        if extra:
            self.extra_latency[instance_id] = extra
        return instance_id, ToolResponse()

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        self.extra_latency.pop(instance_id, None)

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any):
        extra = self.extra_latency.get(instance_id, 0.0)
        await asyncio.sleep(self.median_latency * self.rng.lognormvariate(0.0, 0.5) + extra)
        try:
            value = evaluate(str(parameters.get("expression", "")))
        except (ValueError, SyntaxError, ZeroDivisionError) as exc:
            return ToolResponse(text=f"error: {exc}"), 0.0, {}
        text = str(int(value)) if float(value).is_integer() else f"{value:.4f}"
        return ToolResponse(text=text), 0.0, {}
