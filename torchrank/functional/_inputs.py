"""Argument checks, and :func:`format_inputs`: any input layout as dense ``[Q, N]`` rows (docs/architecture.md).
The checks that read values, and so synchronise a GPU stream, run only with ``validate_args=True``."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

if TYPE_CHECKING:
    from torchrank.functional.backends import Backend

TIES = ("average", "optimistic", "pessimistic", "first")
EMPTY_TARGET_ACTIONS = ("neg", "pos", "skip", "error")
REDUCTIONS = ("mean", "sum", "none")
# CPU batches of more items than this keep unpadded labels in the caller's dtype and are read by blocks of rows:
# a temporary of a whole 10M-item batch is page-faulted in afresh on every call (longer than the work itself)
LARGE_BATCH_ITEMS = 2**20


@dataclass(frozen=True)
class RankingInput:
    """Validated dense input: ``Q`` queries of at most ``N`` items (``M`` judged items for the ideal)."""

    preds: Tensor  # [Q, N] floating
    # [Q, N] labels, 0 at padded positions: in the working dtype, except large unpadded CPU batches, whose labels
    # stay in the caller's dtype (the ranking converts the labels it gathers, and reads the ideal ones by blocks)
    target: Tensor
    mask: Tensor  # [Q, N] bool, True for a real item
    ideal_target: Tensor  # [Q, M] labels of all judged items, 0 at padding (``target`` itself when not given)
    batch_shape: tuple[int, ...]  # the caller's leading shape, restored on per-query output
    backend: Backend  # the backend of the tensors' device, which checked them and ranks them
    judged: Tensor | None = None  # [Q, N] bool, True for an item with a judgment (RBP residual)
    padded: bool = True  # False when every position is a real item (known without reading values)
    padding_last: bool = False  # True when each row's real items come before its padding (flat input)
    exact_ties: bool = False  # rank with the tie order applied to every row (rows known to hold ties)
    integer_labels: bool = False  # the caller's labels came in an integer (or bool) dtype: whole numbers
    finite_scores: bool = False  # checked: no NaN and no infinity among the scores (False: not known)
    # (smallest, largest) scores (dense input only) and labels where the numpy backend's value checks read them:
    # the CPU keys size their bits from them rather than read the values again
    score_range: tuple[float, float] | None = None
    label_range: tuple[float, float] | None = None


def check_choice(name: str, value: object, choices: Sequence[str]) -> None:
    """Raise ``ValueError`` unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"Argument `{name}` must be one of {tuple(choices)}, got {value!r}.")


def normalize_k(k: int | Sequence[int] | None) -> tuple[list[int | None], bool]:
    """The cut-offs as a list (``[None]``: the whole list, which a sequence cannot hold: see ``evaluate``) and
    whether a sequence was given."""
    if k is None:
        return [None], False
    if isinstance(k, Tensor) and k.ndim == 0:  # one cut-off, as the elements of a tensor of cut-offs are
        if not is_integer_tensor(k):
            raise TypeError(f"Argument `k` must be a positive int or a sequence of positive ints, got {k!r}.")
        k = int(k)
    if _is_int(k):
        ks, is_seq = [k], False
    elif isinstance(k, Sequence | Tensor) and not isinstance(k, str):
        ks = [int(v) if isinstance(v, Tensor) and v.numel() == 1 and not v.is_floating_point() else v for v in k]
        is_seq = True
        if not ks:
            raise ValueError("Argument `k` must be a positive int or a non-empty sequence of them, got [].")
    else:
        raise TypeError(f"Argument `k` must be a positive int or a sequence of positive ints, got {k!r}.")
    for v in ks:
        if not _is_int(v) or v <= 0:
            raise ValueError(f"Argument `k` must hold positive ints only, got {k!r}.")
    return ks, is_seq


def check_options(ties: str, empty_target_action: str, reduction: str, relevance_threshold: float) -> None:
    """The checks of the options every ranking function shares."""
    check_choice("ties", ties, TIES)
    check_choice("empty_target_action", empty_target_action, EMPTY_TARGET_ACTIONS)
    check_choice("reduction", reduction, REDUCTIONS)
    if isinstance(relevance_threshold, bool) or not isinstance(relevance_threshold, int | float):
        raise TypeError(f"Argument `relevance_threshold` must be a number, got {relevance_threshold!r}.")
    if not relevance_threshold > 0:
        raise ValueError(f"Argument `relevance_threshold` must be > 0 (label 0 means not relevant), got "
                         f"{relevance_threshold}.")


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_integer_tensor(x: object) -> bool:
    """Whether ``x`` is a tensor of integers (not bool, float or complex): ids, counts, cut-offs."""
    return isinstance(x, Tensor) and not (x.is_floating_point() or x.is_complex() or x.dtype == torch.bool)


def format_inputs(
    preds: Tensor, target: Tensor, *, indexes: Tensor | None = None, mask: Tensor | None = None,
    ideal_target: Tensor | None = None, judged: Tensor | None = None, validate_args: bool = True,
    label_limit: float | None = None, backend: Backend,
) -> RankingInput:
    """Validate the caller's tensors on ``backend`` (their device's) and return them as dense ``[Q, N]`` rows.
    ``label_limit``: the largest label the measures take (exponential DCG's; None: any), checked with the values."""
    check_dense_inputs(preds, target, mask=mask, ideal_target=None)
    _check_bool_like_preds("judged", judged, preds)
    mask = backend.real_mask(mask)  # None where no list is padded: no mask to apply
    # no measure is differentiable: read the values without their graph (numpy can read them then)
    preds, target, ideal_target = (
        x.detach() if isinstance(x, Tensor) and x.requires_grad else x for x in (preds, target, ideal_target)
    )
    given = (preds, target, ideal_target)
    if indexes is not None:
        if ideal_target is not None:  # flat input's ideal labels are per item, as `target`, grouped with it into rows
            check_tensor("ideal_target", ideal_target)
            if ideal_target.shape != preds.shape:
                raise ValueError("With `indexes`, argument `ideal_target` must hold one label per item, shaped as "
                                 f"`preds` {tuple(preds.shape)}, got {tuple(ideal_target.shape)}.")
            _check_same_device("ideal_target", ideal_target, preds.device)
        extra = {name: x for name, x in (("ideal_target", ideal_target), ("judged", judged)) if x is not None}
        (preds, target, *rest), mask = _group_flat([preds, target, *extra.values()], indexes, mask, backend)
        grouped = dict(zip(extra, rest, strict=True))
        ideal_target, judged = grouped.get("ideal_target"), grouped.get("judged")
        batch_shape: tuple[int, ...] = (preds.shape[0],)
    else:
        batch_shape = tuple(preds.shape[:-1])
        n = preds.shape[-1]
        if preds.ndim != 2:  # [Q, N] already: no view to make
            preds, target = preds.reshape(-1, n), target.reshape(-1, n)
        mask, judged = (None if x is None else x.reshape(-1, n) for x in (mask, judged))
    padded = mask is not None  # flat input of equal-length queries: unpadded rows, as dense input without a mask
    if mask is None:  # a broadcast True, with no memory to fill (or to page in on large batches)
        mask = _all_true(preds.device, tuple(preds.shape))
    work = working_dtype(preds)
    integer_labels = not target.is_floating_point()
    if padded and indexes is None:  # the caller's padding may hold any label
        target = torch.where(mask, target.to(work), 0)
    elif padded or not read_by_blocks(target):  # flat input's padding holds 0 already (_group_flat)
        target = target.to(work)
    if ideal_target is None:
        ideal = target
    else:
        _check_ideal(ideal_target, batch_shape, preds.device)
        ideal = ideal_target.reshape(-1, ideal_target.shape[-1]).to(work)
    # the ideal labels are checked against the target's of each query as the rows are formatted (masked, grouped)
    ranges = backend.check_values(given, target, ideal, label_limit) if validate_args else None
    return RankingInput(
        preds=preds, target=target, mask=mask, ideal_target=ideal, batch_shape=batch_shape, backend=backend,
        judged=judged, padded=padded, padding_last=padded and indexes is not None, integer_labels=integer_labels,
        finite_scores=ranges is not None and all(math.isfinite(v) for v in ranges[0]),
        # flat input's rows hold padding scores the caller never gave; padding's label is 0
        score_range=ranges[0] if ranges and indexes is None else None,
        label_range=(min(ranges[1][0], 0.0), ranges[1][1]) if ranges else None,
    )


def check_dense_inputs(preds: Tensor, target: Tensor, *, mask: Tensor | None, ideal_target: Tensor | None) -> None:
    """:func:`format_inputs`' checks of dense input that read no value, for kernels that read the tensors as given."""
    check_tensor("preds", preds)
    check_tensor("target", target)
    if preds.dtype == torch.bool or preds.is_complex():
        raise TypeError(f"Argument `preds` must hold real scores (float or int), got dtype {preds.dtype}.")
    if target.is_complex():
        raise TypeError(f"Argument `target` must hold real labels (bool, int or float), got {target.dtype}.")
    if preds.shape != target.shape:
        raise ValueError(f"Arguments `preds` and `target` must have the same shape, got {tuple(preds.shape)} and "
                         f"{tuple(target.shape)}.")
    _check_same_device("target", target, preds.device)
    if preds.numel() == 0:
        raise ValueError(f"Argument `preds` must not be empty, got shape {tuple(preds.shape)}.")
    if preds.ndim == 0:
        raise ValueError("Argument `preds` must hold a list of scores ([N], [..., N] or flat with `indexes`), got a "
                         "0-d tensor.")
    _check_bool_like_preds("mask", mask, preds)
    if ideal_target is not None:
        _check_ideal(ideal_target, tuple(preds.shape[:-1]), preds.device)


def read_by_blocks(x: Tensor) -> bool:
    """Whether the labels ``x`` form a large CPU batch: kept in the caller's dtype and read by blocks of rows."""
    return x.is_cpu and x.numel() > LARGE_BATCH_ITEMS


@functools.lru_cache(maxsize=16)
def _false(device: torch.device) -> Tensor:
    """A ``[]`` False (cached: never written): the flag of a check that cannot fail."""
    return torch.zeros((), dtype=torch.bool, device=device)


@functools.lru_cache(maxsize=64)
def _all_true(device: torch.device, shape: tuple[int, ...]) -> Tensor:
    """The mask of unpadded input: one True broadcast, no memory (cached: a validation loop's batches share it)."""
    return torch.ones((1, 1), dtype=torch.bool, device=device).expand(shape)


def working_dtype(preds: Tensor) -> torch.dtype:
    """float64 when the scores are float64, else float32 (bf16/fp16 scores are ranked as given)."""
    return torch.float64 if preds.dtype == torch.float64 else torch.float32


def check_tensor(name: str, value: object) -> None:
    """Raise ``TypeError`` unless argument ``name`` is a tensor."""
    if not isinstance(value, Tensor):
        raise TypeError(f"Argument `{name}` must be a torch.Tensor, got {type(value).__name__}.")


def _check_same_device(name: str, value: Tensor, device: torch.device) -> None:
    if value.device != device:
        raise ValueError(f"Argument `{name}` must be on the device of `preds` ({device}), got {value.device}.")


def _check_bool_like_preds(name: str, value: Tensor | None, preds: Tensor) -> None:
    if value is None:
        return
    check_tensor(name, value)
    if value.dtype != torch.bool:
        raise TypeError(f"Argument `{name}` must be a bool tensor, got dtype {value.dtype}.")
    if value.shape != preds.shape:
        raise ValueError(f"Argument `{name}` must have the shape of `preds` {tuple(preds.shape)}, got "
                         f"{tuple(value.shape)}.")
    _check_same_device(name, value, preds.device)


# what value_problems flags, in its order: (argument, what is wrong); the first four are the fused kernel's own
VALUE_PROBLEMS = (
    ("preds", "contains NaN scores; a NaN has no place in a ranking"),
    ("target", "contains NaN or infinite labels"),
    ("target", "must hold labels >= 0, got a negative label"),
    ("ideal_target", "must hold finite labels >= 0 (pad with 0), got a NaN, infinite or negative label"),
    *(
        (name, "holds a label whose exponential gain 2^label - 1 overflows the working dtype (the largest is label 127 "
         "in float32, 1023 with float64 scores: pass preds.double(), or use gain='linear')")
        for name in ("target", "ideal_target")
    ),
    ("ideal_target", "must hold the labels of every judged item, the listed ones among them, got a query whose "
     "ideal_target has fewer labels at or above some value than its target (recall and NDCG would exceed 1)"),
    ("num_judged", "must count every judged item of its query: its R relevant ones, retrieved or not, and the judged "
     "non-relevant ones it lists (every listed item is judged unless `judged` says so), got fewer"),
)
IDEAL_MISSES_LABELS, JUDGED_BELOW_R = 6, 7  # indices in VALUE_PROBLEMS


def value_problems(
    preds: Tensor, target: Tensor, ideal_target: Tensor | None = None, *, label_limit: float | None = None,
    mask: Tensor | None = None,
) -> Tensor:
    """The value checks of dense input as ``[8]`` bool flags on the device (no host read), in :data:`VALUE_PROBLEMS`'
    order, the judged-count flag False (bpref's: :func:`judged_count_problems`); ``label_limit``: exponential DCG's
    largest label. Padded items count, as on every backend; infinite scores rank, infinite labels have no gain.

    Example:
        >>> import torch
        >>> value_problems(torch.tensor([0.5, float("nan")]), torch.tensor([1, -1]), None).tolist()
        [True, False, True, False, False, False, False, False]
        >>> value_problems(torch.tensor([0.5, 0.2]), torch.tensor([1, 1]), torch.tensor([1, 0, 0])).tolist()[6]
        True
    """
    return _value_problems(preds, target, ideal_target, label_limit, _dense_misses_labels(target, ideal_target, mask))


def _dense_misses_labels(target: Tensor, ideal_target: Tensor | None, mask: Tensor | None) -> Tensor:
    """:func:`ideal_misses_labels` of dense ``[..., N]`` input (padding holds no label), False without an ideal."""
    if ideal_target is None:
        return _false(target.device)
    rows = target if mask is None else torch.where(mask, target, 0)
    return ideal_misses_labels(rows.reshape(-1, rows.shape[-1]), ideal_target.reshape(-1, ideal_target.shape[-1]))


def _value_problems(
    preds: Tensor, target: Tensor, ideal_target: Tensor | None, label_limit: float | None, missing: Tensor
) -> Tensor:
    """:func:`value_problems` with the ideal's ``missing`` labels (``[]`` bool) found by the caller."""
    false = _false(preds.device)
    nan_preds = torch.isnan(preds).any() if preds.is_floating_point() else false
    negative = (target < 0).any() if target.dtype != torch.bool else false
    ideal = ideal_target is not None and ideal_target.dtype != torch.bool
    bad_ideal = ((ideal_target < 0).any() | _not_finite(ideal_target)) if ideal else false
    above = _labels_above(target, ideal_target, label_limit)
    return torch.stack([nan_preds, _not_finite(target), negative, bad_ideal, *above, missing, false])


def unfused_value_problems(
    target: Tensor, ideal_target: Tensor | None, *, label_limit: float | None, mask: Tensor | None
) -> Tensor:
    """:func:`value_problems`' flags past its first four ``[4]`` bool: those the fused kernel does not run."""
    missing = _dense_misses_labels(target, ideal_target, mask)
    return torch.stack([*_labels_above(target, ideal_target, label_limit), missing, _false(target.device)])


def ideal_misses_labels(target: Tensor, ideal_target: Tensor) -> Tensor:
    """Whether a row of ``ideal_target`` ``[Q, M]`` (every judged label) has fewer labels ``>= t`` than the row of
    ``target`` ``[Q, N]`` for some ``t`` (``[]`` bool): else every ideal is at least the list's (NDCG <= 1).

    Example:
        >>> import torch
        >>> ideal_misses_labels(torch.tensor([[2, 0, 1]]), torch.tensor([[1, 2, 0, 1]])).item()  # 2, 1 and one more 1
        False
        >>> ideal_misses_labels(torch.tensor([[2, 0, 2]]), torch.tensor([[1, 2, 0, 1]])).item()  # a second 2 missing
        True
    """
    listed, judged = (torch.sort(x.to(torch.uint8) if x.dtype == torch.bool else x, 1, descending=True).values
                      for x in (target, ideal_target))
    m = judged.shape[1]
    beyond = (listed[:, m:] > 0).any() if listed.shape[1] > m else _false(target.device)
    return (listed[:, :m] > judged[:, : listed.shape[1]]).any() | beyond


def judged_count_problems(num_judged: Tensor, least: Tensor) -> Tensor:
    """:data:`VALUE_PROBLEMS`' flags ``[8]`` bool of judged counts (bpref's ``num_judged``) below ``least`` ``[Q]``,
    the judged items the ranking knows of (R and the judged non-relevant items listed)."""
    below = (num_judged.reshape(-1) < least).any()
    return torch.stack([_false(below.device)] * JUDGED_BELOW_R + [below])


def _not_finite(labels: Tensor) -> Tensor:
    return ~torch.isfinite(labels).all() if labels.is_floating_point() else _false(labels.device)


def _labels_above(target: Tensor, ideal_target: Tensor | None, label_limit: float | None) -> list[Tensor]:
    false = _false(target.device)
    return [
        (x > label_limit).any() if label_limit is not None and x is not None and x.dtype != torch.bool else false
        for x in (target, ideal_target)
    ]


_DEFERRED: contextvars.ContextVar[list[Tensor] | None] = contextvars.ContextVar("torchrank_deferred", default=None)


@contextlib.contextmanager
def deferred_value_checks() -> Iterator[list[Tensor]]:
    """Inside the block the device backends' value-check flags (``[8]`` bool) go to the yielded list, unread: a
    metric's update runs its functional so, and never waits on the device.

    Example:
        >>> import torch, torchrank
        >>> from torchrank.functional import ndcg
        >>> from torchrank.functional.checks import deferred_value_checks  # the package's (not a doctest's copy)
        >>> with torchrank.use_backend("torch"), deferred_value_checks() as found:
        ...     _ = ndcg(torch.tensor([[float("nan"), 0.5]]), torch.tensor([[1, 0]]))
        >>> found[0].tolist()
        [True, False, False, False, False, False, False, False]
    """
    found: list[Tensor] = []
    token = _DEFERRED.set(found)
    try:
        yield found
    finally:
        _DEFERRED.reset(token)


def report_value_problems(flags: Tensor) -> None:
    """Keep ``flags`` inside :func:`deferred_value_checks`, else read them (one synchronisation) and raise."""
    found = _DEFERRED.get()
    if found is None:
        return raise_value_problems(flags.tolist())
    found.append(flags)


def raise_value_problems(flags: Sequence[bool]) -> None:
    """Raise ``ValueError`` for the first problem :func:`value_problems` flagged (read to the host), if any."""
    if any(flags):
        _raise_problem(list(flags).index(True))


def _raise_problem(index: int) -> None:  # every backend words the problems so
    name, problem = VALUE_PROBLEMS[index]
    raise ValueError(f"Argument `{name}` {problem}.")


def _check_ideal(ideal_target: Tensor, batch_shape: tuple[int, ...], device: torch.device) -> None:
    check_tensor("ideal_target", ideal_target)
    if tuple(ideal_target.shape[:-1]) != batch_shape or ideal_target.ndim == 0 or ideal_target.shape[-1] == 0:
        raise ValueError(f"Argument `ideal_target` must have shape {(*batch_shape, 'M')} (the leading dims of `preds` "
                         f"and M >= 1 judged labels per query), got {tuple(ideal_target.shape)}.")
    _check_same_device("ideal_target", ideal_target, device)


def _group_flat(
    items: list[Tensor], indexes: Tensor, mask: Tensor | None, backend: Backend
) -> tuple[list[Tensor], Tensor | None]:
    """Flat per-item tensors as padded ``[Q, N]`` rows, one per ``indexes`` value in ascending order (items in input
    order), and the rows' mask: None where no row is padded (grouped input of equal queries: the rows are views)."""
    preds = items[0]
    check_tensor("indexes", indexes)
    if indexes.dtype == torch.bool or indexes.is_floating_point() or indexes.is_complex():
        raise TypeError(f"Argument `indexes` must be an integer tensor, got dtype {indexes.dtype}.")
    if preds.ndim != 1 or indexes.shape != preds.shape:
        raise ValueError("With `indexes`, arguments `preds`, `target` and `indexes` must be 1-D of equal length, got "
                         f"{tuple(preds.shape)}, {tuple(items[1].shape)} and {tuple(indexes.shape)}.")
    _check_same_device("indexes", indexes, preds.device)
    if mask is not None:
        items, indexes = [x[mask] for x in items], indexes[mask]
        if indexes.numel() == 0:
            raise ValueError("Argument `mask` leaves no item to rank.")
    # already grouped (each query's items together, ids ascending) is the common case: no sort then
    grouped = backend.grouped(indexes)
    order = None if grouped else torch.sort(indexes, stable=True).indices
    counts = torch.unique_consecutive(indexes if order is None else indexes[order], return_counts=True)[1]
    num_rows, width = counts.numel(), int(counts.max())  # the output shape needs one host read
    if grouped and width * num_rows == indexes.numel():  # grouped, every query as long: the rows are a view
        return [x.reshape(num_rows, width) for x in items], None
    # each row's first `counts` positions, in order, are the items grouped by query: one masked scatter per tensor
    dense_mask = torch.arange(width, device=preds.device) < counts.unsqueeze(1)
    dense = [backend.scatter_rows(x if order is None else x[order], dense_mask) for x in items]
    return dense, dense_mask
