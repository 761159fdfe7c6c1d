"""Graded average precision against the paper's formula written out pair by pair, against AP, and under ties."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

import torchrank.functional as F
import torchrank.metrics.classes as classes
from torchrank.io import SAMPLE_QRELS, SAMPLE_RUN
from torchrank.io.trec_eval import score_run


def _cumulative(g: list[float], grade: int) -> float:
    return sum(g[: max(grade, 0)])


def _gap_by_pairs(ranked: list[float], judged: list[float], g: list[float] | None, k: int | None) -> float:
    """Robertson, Kanoulas and Yilmaz (2010), eq. for GAP, term by term: ``ranked`` labels in rank order,
    ``judged`` the labels of every judged item; None when no judged item has a grade with g > 0."""
    grades = [math.floor(x) for x in ranked]
    if g is None:  # the documented default: uniform over grades 1..c, c the query's top grade
        top = max([math.floor(x) for x in judged + ranked] + [0])
        g = [1 / top] * top if top else []
    depth = len(grades) if k is None else min(k, len(grades))
    numerator = 0.0
    for n in range(1, depth + 1):
        if grades[n - 1] > 0:
            numerator += sum(_cumulative(g, min(grades[m - 1], grades[n - 1])) for m in range(1, n + 1)) / n
    denominator = sum(_cumulative(g, math.floor(x)) for x in judged)
    return None if denominator <= 0 else numerator / denominator


def _random_lists(seed: int, q: int = 30, n: int = 9, grades: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    preds = torch.randn(q, n, generator=g, dtype=torch.float64)  # distinct scores
    target = torch.randint(0, grades, (q, n), generator=g).to(torch.float64)
    target[0] = 0  # no relevant item
    target[1, :] = 0
    target[1, 4] = grades - 1  # one item, of the top grade
    return preds, target


@pytest.mark.parametrize("probabilities", [None, (0.5, 0.3, 0.2), (0.0, 0.0, 1.0), (0.1, 0.9, 0.0)])
@pytest.mark.parametrize("k", [None, 1, 3, 20])
def test_equals_the_formula_pair_by_pair(probabilities, k):
    preds, target = _random_lists(0)
    got = F.graded_average_precision(
        preds, target, grade_probabilities=probabilities, k=k, reduction="none", empty_target_action="skip"
    )
    order = preds.argsort(1, descending=True)
    for row in range(len(preds)):
        ranked = target[row, order[row]].tolist()
        g = None if probabilities is None else list(probabilities)
        expected = _gap_by_pairs(ranked, target[row].tolist(), g, k)
        if expected is None:
            assert math.isnan(got[row])
        else:
            assert got[row].item() == pytest.approx(expected, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("ties", ["average", "first"])
def test_labels_of_many_grades_equal_the_formula_in_a_few_passes(ties):
    """Grades up to 10^6 and fractional labels (a grade is the integer part): the default visits only the grades
    the labels hold, weighted by the gaps between them, and gives the formula's value over every grade. The
    formula's value does not depend on the top grade c, so c = 100 stands in for 10^6 (its g_j = 1/c cancel)."""
    g = torch.Generator().manual_seed(4)
    preds = torch.randint(0, 6, (20, 8), generator=g).to(torch.float64)  # ties
    scale = torch.tensor([0.0, 1.5, 7.0, 40.9, 70.0, 100.0], dtype=torch.float64)
    target = scale[torch.randint(0, 6, (20, 8), generator=g)]
    got = F.graded_average_precision(preds, target, reduction="none", empty_target_action="skip", ties=ties)
    want = F.graded_average_precision(preds, target, grade_probabilities=[0.01] * 100, reduction="none",
                                      empty_target_action="skip", ties=ties)
    torch.testing.assert_close(got, want, equal_nan=True)
    huge = torch.where(target == 100, 10.0**6, target)
    first = F.graded_average_precision(preds[:3], huge[:3], reduction="none", ties="first")
    order = torch.sort(preds[:3], dim=1, descending=True, stable=True).indices  # ties="first": input order
    for row in range(3):
        expected = _gap_by_pairs(huge[row, order[row]].tolist(), huge[row].tolist(), None, None)
        assert first[row].item() == pytest.approx(expected, rel=1e-9)
    infinite = torch.full((1, 8), math.inf)
    with pytest.raises(ValueError, match="contains NaN or infinite labels"):  # the value checks
        F.graded_average_precision(preds[:1], infinite)
    with pytest.raises(ValueError, match="needs finite labels"):  # unchecked values: GAP's own grade count
        F.graded_average_precision(preds[:1], infinite, validate_args=False)


def test_judged_items_outside_the_list_count_in_the_denominator():
    preds, target = _random_lists(1, q=6)
    extra = torch.tensor([[2.0, 1.0, 0.0]] * 6, dtype=torch.float64)  # judged, never retrieved
    ideal = torch.cat([target, extra], 1)
    got = F.graded_average_precision(preds, target, ideal_target=ideal, reduction="none")
    order = preds.argsort(1, descending=True)
    for row in range(6):
        expected = _gap_by_pairs(target[row, order[row]].tolist(), ideal[row].tolist(), None, None)
        assert got[row].item() == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("ties", ["average", "first", "optimistic", "pessimistic"])
def test_one_grade_is_average_precision(ties):
    preds, target = _random_lists(2, grades=2)  # labels 0 and 1
    preds = torch.round(preds * 2) / 2  # with ties
    ks = [1, 4, 9]
    expected = F.average_precision(preds, target, k=ks, ties=ties, reduction="none")
    for probabilities in (None, (1.0,)):
        got = F.graded_average_precision(preds, target, grade_probabilities=probabilities, k=ks, ties=ties,
                                         reduction="none")
        torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("threshold", [1, 2, 3])
def test_all_weight_on_one_grade_is_average_precision_at_that_threshold(threshold):
    preds, target = _random_lists(3)
    probabilities = tuple(float(j == threshold) for j in (1, 2, 3))
    got = F.graded_average_precision(preds, target, grade_probabilities=probabilities, k=[2, 5], reduction="none",
                                     empty_target_action="skip")
    expected = F.average_precision(preds, target, k=[2, 5], relevance_threshold=threshold, reduction="none",
                                   empty_target_action="skip")
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12, equal_nan=True)


def _every_order_mean(preds: list[float], target: list[float], **kwargs: object) -> torch.Tensor:
    perms = torch.tensor(list(itertools.permutations(range(len(preds)))))
    all_preds = torch.tensor(preds, dtype=torch.float64)[perms]
    all_target = torch.tensor(target, dtype=torch.float64)[perms]
    return F.graded_average_precision(all_preds, all_target, ties="first", reduction="none", **kwargs).mean(0)


@pytest.mark.parametrize("probabilities", [None, (0.2, 0.5, 0.3)])
@pytest.mark.parametrize(
    ("preds", "target"),
    [
        ([1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0], [3, 0, 2, 1, 0, 3, 1]),  # one group, every grade
        ([2.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0], [1, 3, 3, 0, 2, 2, 1]),  # groups across the cut-offs
        ([5.0, 5.0, 4.0, 4.0, 4.0, 3.0, 3.0], [0, 2, 2, 2, 1, 0, 3]),  # equal grades inside a group
    ],
)
def test_average_ties_equal_the_mean_over_every_order(preds, target, probabilities):
    kwargs = {"k": [1, 2, 3, 5, 7], "grade_probabilities": probabilities}
    one = F.graded_average_precision(
        torch.tensor(preds, dtype=torch.float64), torch.tensor(target, dtype=torch.float64), reduction="none", **kwargs
    )
    torch.testing.assert_close(one, _every_order_mean(preds, target, **kwargs), rtol=1e-12, atol=1e-12)


def test_a_tied_row_in_an_untied_batch_equals_the_row_alone():
    """Tied rows of a mostly untied batch are ranked apart (closed forms or enumerated orders): the same values."""
    g = torch.Generator().manual_seed(4)
    preds = torch.randn(40, 30, generator=g)
    target = torch.randint(0, 4, (40, 30), generator=g).float()
    preds[3, :2] = preds[3, 0]  # a tied pair (enumerated orders)
    preds[9, :6] = preds[9, 0]  # a group of six (closed form)
    batch = F.graded_average_precision(preds, target, k=[1, 3, 10, 30], reduction="none")
    for row in (3, 9, 11):
        alone = F.graded_average_precision(preds[row : row + 1].double(), target[row : row + 1], k=[1, 3, 10, 30],
                                           reduction="none")
        torch.testing.assert_close(batch[row : row + 1].double(), alone, rtol=1e-6, atol=1e-7)


def test_empty_lists_and_no_grades():
    """Fully padded rows, and lists whose labels are all below grade 1, score as queries without relevant items."""
    preds, target = torch.rand(3, 4), torch.tensor([[0, 1, 2, 0], [0.5, 0.2, 0, 0], [1, 0, 0, 0]])
    mask = torch.tensor([[True] * 4, [True] * 4, [False] * 4])
    got = F.graded_average_precision(preds, target, mask=mask, ideal_target=target, empty_target_action="skip",
                                     reduction="none")
    assert not got[0].isnan() and got[1].isnan()
    assert got[2] == 0  # a judged relevant item, none retrieved (the ideal labels hold it)
    alone = F.graded_average_precision(preds, target, mask=mask, empty_target_action="skip", reduction="none")
    assert alone[2].isnan()  # without ideal_target, a padded item is not judged
    assert F.graded_average_precision(preds[1], target[1], empty_target_action="pos") == 1


def test_a_query_does_not_depend_on_the_batch():
    """The default's grades run to each query's own top: a batch holding higher grades changes nothing."""
    preds, target = _random_lists(5, q=4, grades=3)
    high = torch.tensor([[9.0] * 9], dtype=torch.float64)  # a query of grade 9 items
    alone = F.graded_average_precision(preds, target, reduction="none")
    with_high = F.graded_average_precision(torch.cat([preds, preds[:1]]), torch.cat([target, high]), reduction="none")
    assert torch.equal(with_high[:4], alone)


def test_evaluate_and_the_class_give_the_function():
    preds, target = _random_lists(6)
    out = F.evaluate(preds, target, ["gap", "gap@3", "graded_average_precision_5", "map"], reduction="none")
    torch.testing.assert_close(out["gap"], F.graded_average_precision(preds, target, reduction="none"))
    torch.testing.assert_close(out["gap@3"], F.graded_average_precision(preds, target, k=3, reduction="none"))
    torch.testing.assert_close(out["graded_average_precision_5"],
                               F.graded_average_precision(preds, target, k=5, reduction="none"))
    metric = classes.GAP(k=3, grade_probabilities=(0.5, 0.25, 0.25))
    metric.update(preds[:10], target[:10])
    metric.update(preds[10:], target[10:])
    expected = F.graded_average_precision(preds, target, k=3, grade_probabilities=(0.5, 0.25, 0.25))
    torch.testing.assert_close(metric.compute(), expected, check_dtype=False)


def test_the_command_line_table_computes_gap():
    scores = score_run(SAMPLE_QRELS, SAMPLE_RUN, ["gap", "map"])
    assert list(scores.values) == ["map", "gap"]
    gap = scores.values["gap"]
    assert gap.shape == (3,) and bool(((gap >= 0) & (gap <= 1)).all())


@pytest.mark.parametrize(
    ("probabilities", "error", "match"),
    [
        ((0.5, 0.4), ValueError, "sum to 1"),
        ((1.5, -0.5), ValueError, "probabilities >= 0"),
        ((), TypeError, "nonempty"),
        ("0.5", TypeError, "sequence of numbers"),
        ((float("nan"), 1.0), ValueError, "grade_probabilities"),
    ],
)
def test_bad_probabilities_are_refused(probabilities, error, match):
    with pytest.raises(error, match=match):
        F.graded_average_precision(torch.rand(2, 4), torch.ones(2, 4), grade_probabilities=probabilities)


def test_labels_above_the_grades_are_refused():
    with pytest.raises(ValueError, match="grade above 2"):
        F.graded_average_precision(torch.rand(4), torch.tensor([0, 1, 3, 2]), grade_probabilities=(0.5, 0.5))
    with pytest.raises(ValueError, match="`ideal_target` holds a label of grade above 2"):
        F.graded_average_precision(torch.rand(2), torch.tensor([0, 1]), ideal_target=torch.tensor([0, 1, 3]),
                                   grade_probabilities=(0.5, 0.5))
    # a fraction below the next grade is still grade 2
    F.graded_average_precision(torch.rand(4), torch.tensor([0, 1, 2.5, 2]), grade_probabilities=(0.5, 0.5))


def test_every_device_gives_the_cpu_values(device):
    preds, target = _random_lists(7, q=50, n=20)
    preds = torch.round(preds * 2) / 2  # tie groups
    for probabilities in (None, (0.2, 0.3, 0.5)):
        kwargs = {"k": [1, 5, 20], "grade_probabilities": probabilities, "reduction": "none"}
        cpu = F.graded_average_precision(preds, target, **kwargs)
        got = F.graded_average_precision(preds.to(device), target.to(device), **kwargs)
        assert got.device.type == torch.device(device).type
        torch.testing.assert_close(got.cpu(), cpu)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_explicit_probabilities_never_wait_on_the_gpu():
    """With explicit probabilities (no grade count to read) and value checks off, GAP never synchronises."""
    preds, target = _random_lists(8, q=50, n=20)
    preds, target = (torch.round(preds * 2) / 2).cuda(), target.cuda()
    kwargs = {"k": [1, 5], "grade_probabilities": (0.2, 0.3, 0.5), "validate_args": False}
    F.graded_average_precision(preds, target, **kwargs)  # the engine's constants (cut-off rows) built once, cached
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        F.graded_average_precision(preds, target, **kwargs)
    finally:
        torch.cuda.set_sync_debug_mode(0)
