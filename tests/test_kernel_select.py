"""The triton kernel's top-k by selection (cut-offs up to 64) equals the numpy backend, under Triton's interpreter.

Every tie mode, cut-offs from 1 to 64 and past it (where the kernel sorts), masks, ``ideal_target``, tie groups
straddling the cut-off, and lists of 1 and of 4,096 items; and whole-list RR, success and first relevant position,
which the kernel counts rather than ranks. The numpy backend is tested against trec_eval, ranx and
scikit-learn elsewhere (tests/test_references.py, tests/test_pytrec_eval.py).
"""

from __future__ import annotations

import random

import pytest
import torch

import torchrank
import torchrank.functional as F
from torchrank.functional import backends
from torchrank.functional._fused_columns import AP, RPREC, Column

pytestmark = pytest.mark.skipif(not backends.triton_available(), reason="triton does not import here")
TIES = ["average", "first", "optimistic", "pessimistic"]
# every family the kernel computes at a cut-off; the deepest cut-off decides between selection and sort
AT_CUTOFFS = ["ndcg@{k}", "ndcg_exp@{k}", "dcg@{k}", "P@{k}", "recall@{k}", "f1@{k}", "success@{k}", "map@{k}",
              "mrr@{k}", "err@{k}", "frp@{k}", "mean_rank@{k}", "rbp@{k}"]


@pytest.fixture
def interpreted():
    """A GPU where there is one (benchmarks/gpu_session.sh runs this file there), else Triton's CPU interpreter."""
    if not torch.cuda.is_available() and not backends.triton_interprets():
        pytest.skip("no GPU, and TRITON_INTERPRET=1 was not set before the kernels were defined")


def _depths(monkeypatch) -> list[int]:
    """The selection depth of every launch from here on (0: the whole list sorted)."""
    from torchrank.functional.backends._triton import kernel

    depths = []
    real = kernel.launch_config
    monkeypatch.setattr(kernel, "launch_config", lambda *a, **kw: (c := real(*a, **kw), depths.append(c["DEPTH"]))[0])
    return depths


def _both(preds, target, names, **options) -> None:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    on_device = {key: value.to(device) if isinstance(value, torch.Tensor) else value for key, value in options.items()}
    with torchrank.use_backend("triton"):
        got = F.evaluate(preds.to(device), target.to(device), names, reduction="none", **on_device)
        got = {name: value.cpu() for name, value in got.items()}
    with torchrank.use_backend("numpy"):
        expected = F.evaluate(preds, target, names, reduction="none", **options)
    for name in names:
        torch.testing.assert_close(got[name], expected[name], rtol=1e-5, atol=1e-5, equal_nan=True,
                                   msg=lambda m, name=name: f"{name} {options.get('ties')}: {m}")


def _batch(seed: int, q: int, n: int, levels: float = 1.5):
    g = torch.Generator().manual_seed(seed)
    preds = (torch.randn(q, n, generator=g) * levels).round()  # tie groups of different labels
    target = torch.randint(0, 4, (q, n), generator=g)
    target[0] = 0  # a query without a relevant item
    mask = torch.rand(q, n, generator=g) > 0.25
    return preds, target, mask


@pytest.mark.parametrize("ties", TIES)
def test_selection_equals_numpy_at_every_cutoff(interpreted, ties, monkeypatch):
    depths = _depths(monkeypatch)
    preds, target, mask = _batch(0, q=3, n=70)
    for ks in ([1, 2, 3, 10, 7, 5], [64, 33, 17]):
        names = [name.format(k=k) for name, k in zip(AT_CUTOFFS, ks * 3, strict=False)]
        _both(preds, target, names, ties=ties, mask=mask, empty_target_action="skip")
    ideal = torch.cat([torch.where(mask, target, 0), torch.randint(0, 4, (3, 6))], 1)
    _both(preds, target, ["ndcg@10", "ndcg_exp@3", "recall@5", "map@10"], ties=ties, mask=mask, ideal_target=ideal)
    assert depths == [16, 64, 16]
    _both(preds, target, ["ndcg@65", "P@65", "mrr@65"], ties=ties)  # past the selection's depth: sorted
    assert depths[-1] == 0


@pytest.mark.parametrize("ties", TIES)
def test_tie_groups_straddling_the_cutoff(interpreted, ties):
    # one group of six equal scores across positions 3..8 with labels 0..3 mixed, and one group over the whole list
    preds = torch.tensor([[9.0, 8.0, 7.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0, 1.0, 0.5], [2.0] * 11])
    target = torch.tensor([[0, 1, 0, 3, 0, 2, 1, 0, 3, 1, 2], [0, 0, 1, 0, 2, 0, 0, 3, 0, 0, 1]])
    names = ["ndcg@4", "ndcg_exp@5", "P@4", "recall@6", "map@5", "mrr@4", "success@4", "err@5", "frp@4",
             "mean_rank@5", "rbp@6", "dcg@9", "f1@3"]
    _both(preds, target, names, ties=ties)


@pytest.mark.parametrize("ties", TIES)
def test_whole_list_measures_by_counts(interpreted, ties, monkeypatch):
    """Whole-list P, R, F1, RR, success and first relevant position rank nothing: the relevant count, or the best
    relevant item's tie group and the items above it decide them (a group of 12 equal scores holding one relevant
    item, and lists without one)."""
    launched = []
    from torchrank.functional.backends._triton import kernel

    real = kernel.launch_config
    monkeypatch.setattr(kernel, "launch_config", lambda *a, **kw: (c := real(*a, **kw), launched.append(c))[0])
    preds, target, mask = _batch(5, q=4, n=30)
    preds[2, :12] = 9.0
    target[2] = 0
    target[2, 7] = 1
    for options in ({"mask": mask}, {"mask": None}):
        _both(preds, target, ["mrr", "success", "frp", "P", "recall", "f1"], ties=ties, **options)
    assert all(c["COUNTS"] for c in launched) and len(launched) == 2


@pytest.mark.parametrize("ties", TIES)
def test_r_precision_by_its_threshold(interpreted, ties, monkeypatch):
    """R-precision sorts nothing: the score at rank R (found bit by bit over the scores' ordered keys, negative
    scores and -0.0 included) and the share of its tie group the tie mode puts in the top R: with whole-list counts it
    takes the counts path, with NDCG@10 the selection; R from ``ideal_target`` (past the listed items too), masks,
    and R = 0 (no relevant item, every item masked)."""
    from torchrank.functional.backends._triton import kernel

    launched = []
    real = kernel.launch_config
    monkeypatch.setattr(kernel, "launch_config", lambda *a, **kw: (c := real(*a, **kw), launched.append(c))[0])
    preds, target, mask = _batch(7, q=5, n=20)
    # R = 5: three relevant items above a group of six tied scores (-0.0 and 0.0 among them) holding two relevant
    preds[1], target[1] = -torch.arange(20.0) - 1, 0
    preds[1, :3], target[1, :3] = 5.0, 1
    preds[1, 10:16], target[1, [11, 14]] = torch.tensor([0.0, -0.0, 0.0, -0.0, 0.0, 0.0]), 2
    mask[1], mask[4] = True, False  # the last list: every item masked, R = 0
    ideal = torch.cat([torch.where(mask, target, 0), torch.randint(0, 3, (5, 30))], 1)  # R past the listed items
    judged = {"mask": mask, "ideal_target": ideal}
    _both(preds, target, ["rprec", "mrr", "P"], ties=ties, empty_target_action="skip", **judged)
    _both(preds, target, ["rprec", "ndcg@10", "P@5"], ties=ties, mask=mask)
    assert [(c["COUNTS"], c["DEPTH"], c["RPREC_THRESHOLD"]) for c in launched] == [(True, 0, True), (False, 16, True)]
    # with a whole-list AP the list is sorted anyway, and R-precision read off it (tests/test_backends.py runs it)
    sorted_ = kernel.launch_config([Column(RPREC, 0), Column(AP, 0)], n=20, m=20, ties=ties, has_mask=True,
                                   has_ideal=False, errors=False, check_values=True)
    assert (sorted_["COUNTS"], sorted_["DEPTH"], sorted_["RPREC_THRESHOLD"]) == (False, 0, False)


def test_a_list_of_one_item(interpreted):
    for ties in TIES:
        _both(torch.tensor([[0.3], [0.1]]), torch.tensor([[1], [0]]), ["ndcg@1", "ndcg@10", "mrr@5", "map@3", "rprec"],
              ties=ties)


def test_lists_of_4096_items(interpreted, monkeypatch):
    depths = _depths(monkeypatch)
    preds, target, mask = _batch(3, q=2, n=4096, levels=20.0)
    for ties in ("average", "first"):
        _both(preds, target, ["ndcg@10", "map@64", "mrr@10", "err@20", "rprec"], ties=ties, mask=mask)
    _both(preds, target, ["rprec"], ties="first", mask=mask)
    assert depths == [64, 64, 16]


# every family the kernel computes; those a whole-list request takes by counts alone
FUSED = ["precision", "recall", "f1", "success", "map", "ndcg", "ndcg_exp", "dcg", "dcg_exp", "mrr", "err", "rbp",
         "mean_rank", "frp"]
COUNTED = ["precision", "recall", "f1", "success", "mrr", "frp"]


def _random_case(seed: int) -> tuple[torch.Tensor, torch.Tensor, list[str], dict]:
    """A small batch of heavy ties (scores from a few values, groups of mixed labels), integer or half-step float
    labels, a mask or none, an ``ideal_target`` with judged labels the lists miss or none, and a random request:
    a few families at cut-offs 1 to 70 or the whole list, or whole-list counts only."""
    r = random.Random(seed)
    g = torch.Generator().manual_seed(seed)
    q, n = r.randint(1, 4), r.choice([1, 2, 3, 7, 16, 33, 70])
    preds = torch.randint(0, r.choice([1, 2, 3, 8, 1000]), (q, n), generator=g).float()
    target = torch.randint(0, r.choice([2, 4]), (q, n), generator=g)
    if r.random() < 0.4:
        target = torch.randint(0, 7, (q, n), generator=g) / 2.0
    options = {"ties": r.choice(TIES), "empty_target_action": r.choice(["neg", "pos", "skip", "error"]),
               "relevance_threshold": r.choice([1, 1, 2]), "mask": None, "ideal_target": None}
    if r.random() < 0.5:
        options["mask"] = torch.rand(q, n, generator=g) > 0.3
    if r.random() < 0.4:
        listed = target if options["mask"] is None else torch.where(options["mask"], target, 0)
        options["ideal_target"] = torch.cat([listed, torch.randint(0, 4, (q, r.randint(0, 5)), generator=g)], 1)
    if r.random() < 0.2:
        names = r.sample(COUNTED, r.randint(1, 3))
    else:
        names = [f"{f}@{r.randint(1, 70)}" if r.random() < 0.8 else f for f in r.sample(FUSED, r.randint(1, 3))]
        names += ["rprec"] if r.random() < 0.1 else []
    return preds, target, names, options


def _outcome(backend: str, preds, target, names, options):
    """The per-query values of ``names`` on ``backend``, or the error's type and message."""
    with torchrank.use_backend(backend):
        try:
            return F.evaluate(preds, target, names, reduction="none", **options)
        except ValueError as error:
            return str(error)


def test_random_requests_equal_numpy(interpreted, monkeypatch):
    """Randomised: the kernel's three paths (selection, sort, counts) equal the numpy backend. A few seconds' worth of
    seeds here; the same cases over seeds 0 to 1,000 found no difference when this test was written."""
    from torchrank.functional.backends._triton import kernel

    launched = []
    real = kernel.launch_config
    monkeypatch.setattr(kernel, "launch_config", lambda *a, **kw: (c := real(*a, **kw), launched.append(c))[0])
    device = "cuda" if torch.cuda.is_available() else "cpu"
    for seed in range(16):
        preds, target, names, options = _random_case(seed)
        expected = _outcome("numpy", preds, target, names, options)
        on_device = {key: value.to(device) if isinstance(value, torch.Tensor) else value
                     for key, value in options.items()}
        got = _outcome("triton", preds.to(device), target.to(device), names, on_device)
        context = f"seed {seed}: {names} {options['ties']} {options['empty_target_action']}"
        if isinstance(expected, str) or isinstance(got, str):
            assert got == expected, context
            continue
        for name in names:
            torch.testing.assert_close(got[name].cpu(), expected[name], rtol=1e-5, atol=1e-5, equal_nan=True,
                                       check_dtype=False, msg=lambda m, name=name, at=context: f"{at} {name}: {m}")
    paths = {"counts" if c["COUNTS"] else "select" if c["DEPTH"] else "sort" for c in launched}
    assert paths == {"counts", "select", "sort"}, paths
