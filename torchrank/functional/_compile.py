"""How torchrank's settings look to ``torch.compile``, without importing the compiler at ``import torchrank`` (as
``torch.compiler.assume_constant_result`` would: benchmarks/results/import_cpu.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

Fn = TypeVar("Fn", bound=Callable[..., object])


def constant_when_compiled(fn: Fn) -> Fn:
    """Mark ``fn`` as ``torch.compiler.assume_constant_result`` does: under ``torch.compile`` it runs once, at
    tracing, and its result (a setting read from a ``ContextVar``, which dynamo cannot trace) is a constant. The
    mark is the attribute dynamo reads; tests/test_backends.py fails (``fullgraph=True``) if dynamo stops reading it.
    """
    fn._dynamo_marked_constant = True  # type: ignore[attr-defined]
    return fn
