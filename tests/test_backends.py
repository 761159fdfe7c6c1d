"""The backends: selection, equal values on every backend, no host reads on the device backends.

The torch backend runs on CPU exactly the code a GPU runs; the triton backend runs on CPU under Triton's
interpreter (``TRITON_INTERPRET=1``, set here for a subprocess-free check: the interpreter is chosen per call).
CUDA cases skip without a GPU.
"""

from __future__ import annotations

import ast
import contextlib
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import torchrank
import torchrank.functional as F
from torchrank.functional import backends
from torchrank.metrics import ERR, MAP, MRR, NDCG, RankingMetrics

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
TRITON = pytest.mark.skipif(not backends.triton_available(), reason="triton does not import here")
# every family the fused kernel computes, as the registry declares them: at a cut-off and the whole list, and RBP
# with another persistence (each code of the kernel: tests/test_registry.py)
FUSED = [spec for spec in F.MEASURES.values() if spec.grammar and spec.fused_code() is not None]
FUSED_MEASURES = [
    *(f"{spec.name}@{3 + i % 3}" for i, spec in enumerate(FUSED) if spec.takes_k), *(s.name for s in FUSED), "rbp.5"
]
TIES = ["average", "first", "optimistic", "pessimistic"]


@pytest.fixture
def interpreted():
    """Triton's CPU interpreter (tests/conftest.py sets TRITON_INTERPRET=1 before triton defines any kernel)."""
    if not backends.triton_interprets():
        pytest.skip("TRITON_INTERPRET=1 was not set before the kernels were defined")


def _batch(seed: int, q: int = 6, n: int = 13, tied: bool = True, padded: bool = True, ideal: bool = False):
    g = torch.Generator().manual_seed(seed)
    preds = torch.randn(q, n, generator=g)
    if tied:
        preds = (preds * 1.5).round()  # groups of equal scores holding different labels
    target = torch.randint(0, 4, (q, n), generator=g)
    target[0] = 0  # a query with no relevant item
    mask = torch.rand(q, n, generator=g) > 0.3 if padded else None
    # the judged labels: the listed items' (the real ones) and 4 more not listed
    listed = target if mask is None else torch.where(mask, target, 0)
    ideal_target = torch.cat([listed, torch.randint(0, 4, (q, 4), generator=g)], 1) if ideal else None
    return preds, target, mask, ideal_target


# ------------------------------------------------------------------------------------------------ selection
def test_selection_by_call_context_and_environment(monkeypatch):
    monkeypatch.setattr(backends, "_process_wide", [None])  # this test's set_backend stays in this test
    monkeypatch.delenv("TORCHRANK_BACKEND", raising=False)
    backends._from_environment.cache_clear()  # the environment is read once per process
    assert torchrank.get_backend() == "auto"
    monkeypatch.setenv("TORCHRANK_BACKEND", "torch")
    backends._from_environment.cache_clear()
    assert torchrank.get_backend() == "torch"
    with torchrank.use_backend("numpy"):
        assert torchrank.get_backend() == "numpy"
    torchrank.set_backend("torch")
    monkeypatch.setenv("TORCHRANK_BACKEND", "numpy")
    assert torchrank.get_backend() == "torch"  # the call beats the environment
    torchrank.set_backend("auto")
    monkeypatch.delenv("TORCHRANK_BACKEND")
    backends._from_environment.cache_clear()
    assert backends.backend_for(torch.device("cpu")).name == "numpy"


@pytest.mark.parametrize("call", [backends.set_backend, backends.use_backend])
def test_unknown_backend_is_a_clear_error(call):
    with pytest.raises(ValueError, match=r"must be one of .*'numpy'.*got 'cuda'"):
        with contextlib.ExitStack() as stack:
            result = call("cuda")
            if hasattr(result, "__enter__"):
                stack.enter_context(result)


def test_unknown_backend_in_the_environment(monkeypatch):
    monkeypatch.setattr(backends, "_process_wide", [None])
    monkeypatch.setenv("TORCHRANK_BACKEND", "fast")
    backends._from_environment.cache_clear()
    try:
        with pytest.raises(ValueError, match="TORCHRANK_BACKEND must be one of"):
            F.ndcg(torch.rand(2, 3), torch.ones(2, 3))
    finally:
        monkeypatch.undo()
        backends._from_environment.cache_clear()


def test_triton_without_a_kernel_for_the_device_runs_on_torch(monkeypatch):
    monkeypatch.setattr(backends, "triton_interprets", lambda: False)
    monkeypatch.setattr(backends, "triton_available", lambda: True)
    with torchrank.use_backend("triton"):
        assert backends.backend_for(torch.device("cpu")).name == "torch"


def test_only_a_request_s_entry_points_look_up_the_backend():
    """The ordering seam: the backend is looked up where a request starts (the pipeline, the id-list helpers); the
    metrics ask ``backends.raises_at_once`` whether values are checked on the host; every other module calls the
    backend object the input and the ranking carry, and none reads the setting (``get_backend``) to branch on it."""
    root = Path(torchrank.__file__).parent
    lookups: dict[str, set[str]] = {}
    for path in root.rglob("*.py"):
        name = path.relative_to(root).as_posix()
        if name.startswith("functional/backends/"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                called = getattr(node.func, "id", getattr(node.func, "attr", None))
                if called in ("backend_for", "get_backend", "uses_numpy"):
                    lookups.setdefault(name, set()).add(called)
    assert lookups == {name: {"backend_for"} for name in (
        "functional/_pipeline.py", "functional/ids.py")}
    for name in ("numpy", "torch"):
        with torchrank.use_backend(name):
            backend = backends.backend_for(torch.device("cpu"))
        assert isinstance(backend, backends.Backend) and backend.name == name


@CUDA
def test_numpy_backend_refuses_gpu_tensors():
    with torchrank.use_backend("numpy"), pytest.raises(ValueError, match="CPU tensors only"):
        F.ndcg(torch.rand(2, 3, device="cuda"), torch.ones(2, 3, device="cuda"))


# ------------------------------------------------------------------------------------------------ equal values
def _evaluate(backend: str, preds, target, mask, ideal, **options) -> dict[str, torch.Tensor]:
    with torchrank.use_backend(backend):
        return F.evaluate(preds, target, FUSED_MEASURES, mask=mask, ideal_target=ideal, reduction="none", **options)


def _assert_equal(got: dict, expected: dict, context: str) -> None:
    for name in expected:
        torch.testing.assert_close(got[name].cpu(), expected[name], rtol=1e-5, atol=1e-5, equal_nan=True,
                                   msg=lambda m, name=name: f"{context} {name}: {m}")


def test_unchecked_nan_scores_rank_as_documented():
    """With validate_args=False a NaN score is not refused: it ranks last on the numpy backend and first on the
    device backends (validate_args' documentation says so; neither is a defined value)."""
    preds, target = torch.tensor([[0.5, float("nan"), 0.9, 0.1]]), torch.tensor([[0, 1, 0, 0]])
    with torchrank.use_backend("numpy"):
        assert F.precision(preds, target, k=3, validate_args=False).item() == 0.0
        assert F.precision(preds, target, k=4, validate_args=False).item() == 0.25
    with torchrank.use_backend("torch"):
        assert F.precision(preds, target, k=1, validate_args=False).item() == 1.0


@pytest.mark.parametrize("ties", TIES)
@pytest.mark.parametrize("seed", range(3))
def test_torch_backend_equals_numpy(ties, seed):
    preds, target, mask, ideal = _batch(seed, padded=seed != 1, ideal=seed == 2)
    for empty in ("neg", "skip"):
        options = {"ties": ties, "empty_target_action": empty}
        _assert_equal(_evaluate("torch", preds, target, mask, ideal, **options),
                      _evaluate("numpy", preds, target, mask, ideal, **options), f"torch {ties} {empty}")


@TRITON
@pytest.mark.parametrize("ties", TIES)
def test_triton_backend_equals_numpy(interpreted, ties, monkeypatch):
    from torchrank.functional.backends._triton import kernel as _fused

    launched = []
    real = _fused.fused_values
    monkeypatch.setattr(_fused, "fused_values", lambda *a, **k: launched.append(1) or real(*a, **k))
    for seed, (tied, padded, ideal) in enumerate([(True, True, False), (True, False, True), (False, True, False)]):
        preds, target, mask, ideal_target = _batch(seed, q=4, n=9 + 4 * seed, tied=tied, padded=padded, ideal=ideal)
        options = {"ties": ties, "empty_target_action": "skip" if seed else "neg"}
        _assert_equal(_evaluate("triton", preds, target, mask, ideal_target, **options),
                      _evaluate("numpy", preds, target, mask, ideal_target, **options), f"triton {ties} {seed}")
    assert len(launched) == 3  # the fused kernel ran, no fallback


@pytest.mark.parametrize("backend", ["torch", pytest.param("triton", marks=TRITON)])
def test_exponential_gains_of_labels_past_float32s_range(backend):
    """2^label overflows float32 past label 127: NDCG and ERR, ratios of gains, stay exact on every backend."""
    if backend == "triton" and not backends.triton_interprets():
        pytest.skip("no Triton interpreter")
    g = torch.Generator().manual_seed(11)
    preds, target = torch.randn(4, 9, generator=g), torch.randint(100, 200, (4, 9), generator=g)
    preds[1, :4] = 0.5  # a tie group of different labels
    for ties in TIES:
        names = ["ndcg_exp@5", "ndcg_exp", "err@5", "err"]
        with torchrank.use_backend(backend):
            got = F.evaluate(preds, target, names, ties=ties, reduction="none")
        expected = F.evaluate(preds, target, names, ties=ties, reduction="none")
        _assert_equal(got, expected, f"{backend} {ties}")
        assert all(torch.isfinite(v).all() for v in got.values())


@TRITON
def test_triton_backend_single_functions_and_fallbacks(interpreted):
    preds, target, mask, _ = _batch(7, q=3, n=8)
    calls = [
        lambda: F.ndcg(preds, target, k=[2, 5], mask=mask), lambda: F.average_precision(preds, target, mask=mask),
        lambda: F.ndcg(preds, target, k=3, discount="power"),  # no kernel for this discount: the torch backend
        lambda: F.reciprocal_rank(preds.double(), target),  # float64 scores: the torch backend
        lambda: F.rbp(preds, target, k=[2, 5], p=0.7, max_label=4, mask=mask),  # a fixed top of the label scale
        lambda: F.rbp(preds, target, p=0.7, residual=True, judged=mask),  # judgments: the torch backend
        lambda: F.evaluate(preds, target, ["rbp.5", "rbp.95", "frp@20"], mask=mask, reduction="none"),
        lambda: F.r_precision(preds, target, mask=mask, ideal_target=torch.cat([target * mask, target[:, :5]], 1)),
        lambda: F.mean_rank(preds, target, k=[1, 4, 20], mask=mask, ties="pessimistic"),
    ]
    with torchrank.use_backend("triton"):
        got = [call() for call in calls]
    expected = [call() for call in calls]
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)


@TRITON
def test_a_kernel_that_fails_to_build_falls_back_to_torch_with_a_warning(interpreted, monkeypatch):
    from torchrank.functional.backends._triton import kernel as _fused

    class BuildError(Exception):
        pass

    def fail(*args, **kwargs):
        raise BuildError("no such instruction on this device")

    monkeypatch.setattr(_fused, "KERNEL_ERRORS", (BuildError,))
    monkeypatch.setattr(_fused, "fused_values", fail)
    preds, target, mask, _ = _batch(8, q=3, n=10)
    with torchrank.use_backend("triton"), pytest.warns(RuntimeWarning, match="ran on the torch backend instead"):
        got = F.ndcg(preds, target, k=5, mask=mask)
    torch.testing.assert_close(got, F.ndcg(preds, target, k=5, mask=mask))


@TRITON
def test_triton_backend_checks_values_and_empty_queries(interpreted):
    preds, target = torch.rand(2, 4), torch.tensor([[1, 0, 0, 0], [0, 0, 0, 0]])
    with torchrank.use_backend("triton"):
        with pytest.raises(ValueError, match="`preds` contains NaN"):
            F.ndcg(torch.tensor([[0.1, float("nan")]]), torch.tensor([[1, 0]]))
        with pytest.raises(ValueError, match="labels >= 0"):
            F.ndcg(torch.rand(1, 2), torch.tensor([[1, -1]]))
        for k in (1, None):  # the selection rounds and the sort: each writes the flags before it ranks
            with pytest.raises(ValueError, match="`preds` contains NaN"):
                F.precision(torch.tensor([[0.1, float("nan")]]), torch.tensor([[1, 0]]), k=k, mask=torch.ones(1, 2) > 0)
            with pytest.raises(ValueError, match="`ideal_target` must hold finite labels"):
                F.ndcg(torch.rand(1, 2), torch.tensor([[1, 0]]), k=k, ideal_target=torch.tensor([[float("nan"), 1.0]]))
        with pytest.raises(ValueError, match="no relevant item"):
            F.ndcg(preds, target, empty_target_action="error")
        with pytest.raises(ValueError, match="same shape"):
            F.ndcg(preds, target[:, :3])


BACKENDS = ["numpy", "torch", pytest.param("triton", marks=TRITON)]
INF, NAN = float("inf"), float("nan")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ({"target": [[INF, 0.0, 1.0, 0.0]]}, r"`target` contains NaN or infinite labels"),
        ({"target": [[1.0, 0.0, -INF, 0.0]]}, r"`target` contains NaN or infinite labels"),
        ({"ideal_target": [[NAN, 1.0, 0.0]]}, r"`ideal_target` must hold finite labels >= 0"),
        ({"ideal_target": [[INF, 1.0, 0.0]]}, r"`ideal_target` must hold finite labels >= 0"),
    ],
    ids=["inf target", "-inf target", "nan ideal", "inf ideal"],
)
def test_every_backend_refuses_non_finite_labels(backend, bad, match):
    """Infinite labels (and NaN ideal labels) were let through: NDCG NaN, DCG inf, an infinite ideal making NDCG 0.
    Every backend refuses them with one message (the triton kernel finds them as it reads the labels), in the
    functional and in a metric's dense and flat updates; finite labels give the values they gave."""
    if backend == "triton" and not torch.cuda.is_available() and not backends.triton_interprets():
        pytest.skip("no CUDA device and no Triton interpreter")
    preds = torch.tensor([[0.9, 0.4, 0.7, 0.1]])
    given = {"target": [[1.0, 0.0, 2.0, 0.0]], "ideal_target": [[2.0, 1.0, 0.0]]} | bad
    target, ideal = (torch.tensor(given[name]) for name in ("target", "ideal_target"))
    with torchrank.use_backend(backend):
        for measures in (["ndcg@3"], ["ndcg", "dcg", "err", "rbp", "map"]):  # the fused kernel, and per measure
            with pytest.raises(ValueError, match=match):
                F.evaluate(preds, target, measures, ideal_target=ideal)
        metric = NDCG(k=3)  # a dense update: the device backends raise at compute
        with pytest.raises(ValueError, match=match):
            metric.update(preds, target, ideal_target=ideal)
            metric.compute()
        flat = NDCG(k=3)  # flat storage reads NaN as "no ideal label given": checked before it is stored
        with pytest.raises(ValueError, match=match):
            flat.update(preds[0], target[0], indexes=torch.zeros(4, dtype=torch.long),
                        ideal_target=torch.nn.functional.pad(ideal[0], (0, 1)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_finite_labels_and_infinite_scores_still_pass(backend):
    if backend == "triton" and not torch.cuda.is_available() and not backends.triton_interprets():
        pytest.skip("no CUDA device and no Triton interpreter")
    preds, target = torch.tensor([[INF, 0.4, -INF, 0.1]]), torch.tensor([[1.0, 0.0, 2.0, 0.0]])
    with torchrank.use_backend(backend):
        got = F.evaluate(preds, target, ["ndcg@3", "err"], ideal_target=torch.tensor([[2.0, 1.0, 0.0]]))
    with torchrank.use_backend("numpy"):
        expected = F.evaluate(preds, target, ["ndcg@3", "err"], ideal_target=torch.tensor([[2.0, 1.0, 0.0]]))
    _assert_equal(got, expected, backend)
    assert all(torch.isfinite(v).all() for v in got.values())


# ------------------------------------------------------------------------------------------------ no host reads
_READS = {"_local_scalar_dense", "nonzero", "masked_select", "is_nonzero", "item"}


class HostReads(TorchDispatchMode):
    """Counts the operations that read a tensor's values on the host (on a GPU: a synchronisation), and the aten
    operations run; ``Tensor.tolist`` and ``numpy`` bypass dispatch and are counted by :func:`counting`."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []
        self.ops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func._overloadpacket.__name__
        self.ops += 1
        if name in _READS:
            self.reads.append(name)
        if name in ("index", "index_put", "index_put_") and len(args) > 1:
            if any(i is not None and i.dtype == torch.bool for i in args[1]):
                self.reads.append(f"{name} by a bool mask")
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def counting(monkeypatch):
    mode = HostReads()
    for method in ("tolist", "numpy", "item", "__bool__"):
        real = getattr(torch.Tensor, method)

        def read(self, *a, _real=real, _method=method, **k):
            mode.reads.append(_method)
            return _real(self, *a, **k)

        monkeypatch.setattr(torch.Tensor, method, read)
    with mode:
        yield mode
    monkeypatch.undo()


METRICS = {
    "NDCG": lambda: NDCG(k=10), "MAP": lambda: MAP(), "MRR": lambda: MRR(k=10),
    "ERR": lambda: ERR(k=10, ties="first"),  # under "average" ERR reads once (its tie groups' dynamic program)
    "RankingMetrics": lambda: RankingMetrics(["ndcg@10", "map@100", "mrr", "P@5", "recall@20", "err@20"],
                                             ties="optimistic"),
}


@pytest.mark.parametrize("backend", ["torch", pytest.param("triton", marks=TRITON)])
@pytest.mark.parametrize("name", list(METRICS))
@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("padded", [False, True])
def test_metric_updates_read_nothing_on_the_device_backends(backend, name, tied, padded, monkeypatch):
    if backend == "triton" and not torch.cuda.is_available() and not backends.triton_interprets():
        pytest.skip("no CUDA device and no Triton interpreter")
    preds, target, mask, _ = _batch(3, q=8, n=24, tied=tied, padded=padded)
    metric = METRICS[name]()
    with torchrank.use_backend(backend):
        metric.update(preds, target, mask=mask)  # first call: caches, compilation
        with counting(monkeypatch) as mode:
            metric.update(preds, target, mask=mask)
        assert mode.reads == [], f"{name} update read the host: {mode.reads}"
        value = metric.compute()
    with torchrank.use_backend("numpy"):
        reference = METRICS[name]()
        reference.update(preds, target, mask=mask)
        reference.update(preds, target, mask=mask)
        expected = reference.compute()
    if isinstance(value, dict):
        for key in value:
            torch.testing.assert_close(value[key], expected[key], rtol=1e-5, atol=1e-6)
    else:
        torch.testing.assert_close(value, expected, rtol=1e-5, atol=1e-6)


def test_functional_reads_once_to_check_values_and_never_without(monkeypatch):
    preds, target, mask, _ = _batch(4, tied=True)
    with torchrank.use_backend("torch"):
        F.ndcg(preds, target, k=5, mask=mask)
        with counting(monkeypatch) as checked:
            F.evaluate(preds, target, ["ndcg@5", "map", "mrr@10", "P@3"], mask=mask)
        with counting(monkeypatch) as unchecked:
            F.evaluate(preds, target, ["ndcg@5", "map", "mrr@10", "P@3"], mask=mask, validate_args=False)
    assert checked.reads == ["tolist"]
    assert unchecked.reads == []


@pytest.mark.parametrize("backend", ["torch", pytest.param("triton", marks=TRITON)])
def test_a_bad_batch_is_left_out_and_raised_at_compute(backend):
    if backend == "triton" and not torch.cuda.is_available() and not backends.triton_interprets():
        pytest.skip("no CUDA device and no Triton interpreter")
    preds, target, _, _ = _batch(5, padded=False)
    bad = preds.clone()
    bad[1, 2] = float("nan")
    with torchrank.use_backend(backend):
        metric = NDCG(k=5)
        metric.update(preds, target)
        metric.update(bad, target)
        metric.update(preds, torch.where(target > 2, -1, target))
        with pytest.raises(ValueError, match=r"`preds` contains NaN scores.* in update 2"):
            metric.compute()
        assert metric.count[0] == preds.shape[0]  # only the first batch counted
        metric.reset()
        metric.update(preds, target)
        torch.testing.assert_close(metric.compute(), F.ndcg(preds, target, k=5))


def test_torch_backend_update_op_count():
    """A validation-loop update on the torch backend is a few dozen aten operations, not hundreds (the op budget
    grows only with a new kind of quantity)."""
    preds, target = torch.randn(256, 100), torch.randint(0, 5, (256, 100))
    metric = NDCG(k=10)
    with torchrank.use_backend("torch"):
        metric.update(preds, target)
        with HostReads() as mode:
            metric.update(preds, target)
    # 39: value checks 6, ranking 2, ideal 4, tie groups 8, DCG and NDCG 6, empty-query fill 4, the state 9
    assert mode.ops <= 40, mode.ops


# ------------------------------------------------------------------------------------------------ CUDA
@CUDA
@pytest.mark.parametrize("backend", ["torch", pytest.param("triton", marks=TRITON)])
@pytest.mark.parametrize("ties", TIES)
def test_cuda_backends_equal_the_cpu(backend, ties):
    for seed, (tied, padded, ideal) in enumerate([(True, True, False), (True, False, True), (False, False, False)]):
        preds, target, mask, ideal_target = _batch(seed, q=64, n=50 + 300 * seed, tied=tied, padded=padded,
                                                   ideal=ideal)
        cuda = [None if x is None else x.cuda() for x in (preds, target, mask, ideal_target)]
        _assert_equal(_evaluate(backend, *cuda, ties=ties), _evaluate("numpy", preds, target, mask, ideal_target,
                                                                      ties=ties), f"cuda {backend} {ties}")


@CUDA
@pytest.mark.parametrize("backend", ["torch", pytest.param("triton", marks=TRITON)])
def test_cuda_metric_updates_never_synchronise(backend):
    preds, target = torch.randn(256, 100, device="cuda"), torch.randint(0, 5, (256, 100), device="cuda")
    tied = (preds * 2).round()
    with torchrank.use_backend(backend):
        metrics = [NDCG(k=10).cuda(), MAP().cuda(), MRR().cuda(),
                   RankingMetrics(["ndcg@10", "map@100", "P@5", "recall@20"]).cuda()]
        for metric in metrics:
            metric.update(preds, target)
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            for metric in metrics:
                metric.update(preds, target)
                metric.update(tied, target)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        values = [metric.compute() for metric in metrics]
    with torchrank.use_backend("numpy"):
        for metric, value in zip([NDCG(k=10), MAP(), MRR()], values, strict=False):
            for p in (preds, preds, tied):
                metric.update(p.cpu(), target.cpu())
            torch.testing.assert_close(value.cpu(), metric.compute(), rtol=1e-5, atol=1e-6)


@CUDA
def test_cuda_metric_update_is_capturable_in_a_graph():
    preds, target = torch.randn(256, 100, device="cuda"), torch.randint(0, 5, (256, 100), device="cuda")
    with torchrank.use_backend("torch"):
        metric = NDCG(k=10).cuda()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                metric.update(preds, target)
        torch.cuda.current_stream().wait_stream(stream)
        metric.reset()  # new state tensors: the graph captures these (capture runs nothing)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            metric.update(preds, target)
        for _ in range(3):
            graph.replay()
        torch.testing.assert_close(metric.sums[1], torch.tensor(3 * 256.0, dtype=torch.float64, device="cuda"))


def test_torch_backend_functional_compiles_without_graph_breaks():
    """The torch backend's functional call on dense input is one graph under torch.compile(fullgraph=True): the
    backend and budget settings are constants of the graph (functional/_compile.py), though torchrank's import
    leaves the compiler unimported. The "eager" compiler backend checks the capture without code generation."""
    import warnings

    preds, target = torch.randn(16, 20), torch.randint(0, 4, (16, 20))
    tied = (preds * 2).round()

    def measures(p: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        values = F.evaluate(p, t, ["ndcg@5", "map", "mrr@10", "P@3"], reduction="none", validate_args=False)
        return torch.stack(list(values.values()), 1)

    with torchrank.use_backend("torch"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # dynamo's notes on the cached constants it inlines
        compiled = torch.compile(measures, fullgraph=True, backend="eager")
        for p in (preds, tied):
            torch.testing.assert_close(compiled(p, target), measures(p, target))


def test_constant_when_compiled_marks_as_torch_compiler_assume_constant_result():
    """functional/_compile.py sets by hand the mark that torch's public decorator sets (which imports torch._dynamo):
    the two must mark a function alike, else a torch upgrade changed the mark and the settings stop being constants
    (the fullgraph test above then fails too, at a ContextVar read, without saying why)."""
    from torchrank.functional._compile import constant_when_compiled

    def ours() -> None: ...

    def torchs() -> None: ...

    marked = constant_when_compiled(ours)
    assert marked is ours and vars(ours)  # the function itself, with a mark
    assert torch.compiler.assume_constant_result(torchs) is torchs
    assert vars(ours) == vars(torchs)


def test_import_leaves_the_compiler_and_triton_unimported():
    """torch._dynamo and triton cost more than torch itself to import: a process that never compiles and never runs
    a fused kernel (the command line, a DataLoader worker) does not pay for them. One fresh process (an import is
    done once per process), the modules in turn."""
    code = (
        "import importlib, sys\n"
        "for module in ('torchrank.cli', 'torchrank.functional', 'torchrank.losses', 'torchrank.metrics'):\n"
        "    importlib.import_module(module)\n"
        "    print(module, sorted({'torch._dynamo', 'triton'} & set(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"{module} []" for module in ("torchrank.cli", "torchrank.functional", "torchrank.losses", "torchrank.metrics")
    ]
