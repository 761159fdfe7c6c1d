"""How torchrank's settings look to ``torch.compile``, without importing the compiler.

``torch.compiler.assume_constant_result`` imports ``torch._dynamo`` (and through it triton, when installed) at
the first decoration: for a decorator at module level, at ``import torchrank.functional``, so that every process
(command line, DataLoader worker, DDP rank) paid for the compiler's import without ever compiling; the cost is
measured in ``benchmarks/results/import_cpu.md`` (``python -m benchmarks.bench_import``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

Fn = TypeVar("Fn", bound=Callable[..., object])


def constant_when_compiled(fn: Fn) -> Fn:
    """Mark ``fn`` as ``torch.compiler.assume_constant_result`` does, leaving the compiler unimported.

    Under ``torch.compile``, a call of ``fn`` is made once, at tracing, and its result is a constant of the graph
    (a setting read from a ``ContextVar``, which dynamo cannot trace). The mark is the attribute that torch's
    decorator sets and dynamo reads when it meets the call; tests/test_backends.py compiles the torch backend with
    ``fullgraph=True``, which fails if dynamo stops reading it.

    Example:
        >>> getter = constant_when_compiled(lambda: "torch")
        >>> getter()  # an ordinary function outside torch.compile
        'torch'
    """
    fn._dynamo_marked_constant = True  # type: ignore[attr-defined]
    return fn
