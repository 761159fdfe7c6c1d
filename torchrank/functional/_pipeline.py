"""One pipeline for every ranking function, around its measures ``(ranking, ks, **params) -> (values [Q, K],
no_relevant [Q])``: validate, format, rank once, measure, score empty queries, reduce (docs/architecture.md)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from torchrank.functional._chunking import PARAMETER_ROWS, evaluate_in_chunks, reduce_queries
from torchrank.functional._fused_columns import ERR
from torchrank.functional._inputs import (
    REDUCTIONS,
    RankingInput,
    check_choice,
    check_options,
    format_inputs,
    normalize_k,
    report_value_problems,
    unfused_value_problems,
    working_dtype,
)
from torchrank.functional._measure import Kernel, fused_code, fused_columns
from torchrank.functional._ranked import Ranking, apply_measure, rank
from torchrank.functional.backends import Backend, backend_for, use_backend

Requests = Sequence[tuple[Kernel, Sequence[int | None], dict]]  # (measure, cut-offs, params): columns in that order


def run_measure(
    measure: Kernel, preds: Tensor, target: Tensor, *, k: int | Sequence[int] | None = None,
    indexes: Tensor | None, mask: Tensor | None, ideal_target: Tensor | None, judged: Tensor | None = None, ties: str,
    empty_target_action: str, reduction: str, relevance_threshold: float, validate_args: bool, **params: object,
) -> Tensor:
    """Validate and rank the input, apply ``measure`` and reduce its per-query values; the options come from a
    public function, with their defaults (``k`` and ``judged`` None where it takes none)."""
    ks, k_is_sequence = normalize_k(k)
    check_choice("reduction", reduction, REDUCTIONS)
    values = per_query_values(
        [(measure, ks, params)], preds, target, indexes=indexes, mask=mask, ideal_target=ideal_target, judged=judged,
        ties=ties, empty_target_action=empty_target_action, relevance_threshold=relevance_threshold,
        validate_args=validate_args,
    )
    out = values if reduction == "none" else reduce_queries(values.reshape(-1, len(ks)), reduction, ())
    return out if k_is_sequence else out[..., 0]


def _params_as_rows(requests: Requests, preds: Tensor) -> dict | None:
    """The requests' tensor parameters as rows to chunk with the input: ``[*batch, 1]`` for one per query (bpref's
    judged counts), shaped as ``preds`` for one per item (infAP's pool); None where one is neither."""
    if not isinstance(preds, Tensor) or preds.dim() < 1:
        return None
    rows = {}
    num_queries = preds.numel() // max(preds.shape[-1], 1)
    for i, (_, _, params) in enumerate(requests):
        for name, value in params.items():
            if not isinstance(value, Tensor):
                continue
            if value.shape not in ((num_queries,), (num_queries, preds.shape[-1])):
                return None
            width = 1 if value.dim() == 1 else preds.shape[-1]  # a value per query: a column
            rows[f"{PARAMETER_ROWS}{i}:{name}"] = value.reshape(*preds.shape[:-1], width)
    return rows


def _requests_with_params(requests: Requests, chunk: dict) -> list:
    """``requests`` with their tensor parameters replaced by the rows of ``chunk`` (:func:`_params_as_rows`)."""

    def given(i: int, name: str, x: object) -> object:  # the chunk's rows in the parameter's shape
        return chunk[f"{PARAMETER_ROWS}{i}:{name}"].reshape(-1, *x.shape[1:]) if isinstance(x, Tensor) else x

    return [(m, ks, {n: given(i, n, v) for n, v in params.items()}) for i, (m, ks, params) in enumerate(requests)]


def per_query_values(
    requests: Requests, preds: Tensor, target: Tensor, *, indexes: Tensor | None, mask: Tensor | None,
    ideal_target: Tensor | None, judged: Tensor | None, ties: str, empty_target_action: str, relevance_threshold: float,
    validate_args: bool,
) -> Tensor:
    """The per-query values ``[*batch, K]`` of ``requests``, empty queries scored: by the backend's fused kernel where
    it covers them, else from one ranking of the input (by chunks of queries past the memory budget)."""
    backend = backend_for(preds.device) if isinstance(preds, Tensor) else None
    if backend is not None and indexes is None and judged is None and isinstance(target, Tensor):
        fused = _fused_per_query(requests, preds, target, mask, ideal_target, backend, ties, empty_target_action,
                                 relevance_threshold, validate_args)
        if fused is not None:
            return fused
    rows_of_params = _params_as_rows(requests, preds)
    if indexes is None and rows_of_params is not None:
        check_options(ties, empty_target_action, "none", relevance_threshold)
        chunked = evaluate_in_chunks(
            lambda t: per_query_values(
                _requests_with_params(requests, t), t["preds"], t["target"], indexes=None, mask=t["mask"],
                ideal_target=t["ideal_target"], judged=t["judged"], ties=ties, empty_target_action=empty_target_action,
                relevance_threshold=relevance_threshold, validate_args=validate_args,
            ),
            preds, {"target": target, "mask": mask, "ideal_target": ideal_target, "judged": judged, **rows_of_params},
        )
        if chunked is not None:
            return chunked
    inputs, ranking = prepare(
        preds, target, indexes=indexes, mask=mask, ideal_target=ideal_target, judged=judged, ties=ties,
        empty_target_action=empty_target_action, reduction="none", relevance_threshold=relevance_threshold,
        validate_args=validate_args, depth=deepest([k for _, ks, _ in requests for k in ks]),
        label_limit=label_limit(requests, preds), backend=backend,
    )
    return measure_ranking(requests, inputs, ranking, empty_target_action, validate_args)


def measure_ranking(
    requests: Requests, inputs: RankingInput, ranking: Ranking, empty_target_action: str, validate_args: bool
) -> Tensor:
    """The per-query values ``[*batch, K]`` of ``requests`` over the ``ranking`` of ``inputs``, empty queries scored;
    with ``validate_args``, the value checks the kernels declare of their own parameters (bpref's judged counts
    against R), reported as the input's are."""
    measured = [apply_measure(measure, ranking, ks, **params) for measure, ks, params in requests]  # one per family
    for measure, _, params in requests:
        declared = getattr(measure, "value_problems", None) if validate_args else None
        if declared is not None and (flags := declared(ranking, params)) is not None:
            report_value_problems(flags)
    if len(measured) == 1:
        values, empty = measured[0]
    else:  # every family's columns filled at once: per-family calls cost more than the work on small batches
        values = torch.cat([v for v, _ in measured], 1)
        empty = torch.cat([e.unsqueeze(1).expand_as(v) if e.ndim == 1 else e for v, e in measured], 1)
    return finalize(values, empty, inputs, empty_target_action, "none", True)


def prepare(
    preds: Tensor, target: Tensor, *, ties: str, empty_target_action: str, reduction: str, relevance_threshold: float,
    depth: int | None = None, **formatting: Any,
) -> tuple[RankingInput, Ranking]:
    """Check the shared options, format the input (:func:`format_on_backend`) and rank it once, to ``depth``."""
    check_options(ties, empty_target_action, reduction, relevance_threshold)
    inputs = format_on_backend(preds, target, **formatting)
    return inputs, rank(inputs, ties=ties, relevance_threshold=relevance_threshold, depth=depth)


def format_on_backend(preds: Tensor, target: Tensor, *, backend: Backend | None = None, **options: Any) -> RankingInput:
    """:func:`~torchrank.functional._inputs.format_inputs` on ``backend``, by default ``preds``' device's (the CPU's
    for what is not a tensor, which the checks then refuse)."""
    backend = backend or backend_for(preds.device if isinstance(preds, Tensor) else torch.device("cpu"))
    return format_inputs(preds, target, backend=backend, **options)


def label_limit(requests: Requests, preds: Tensor) -> float | None:
    """The largest label every requested kernel takes in ``preds``' working dtype (None: any), as declared by kernels
    whose values grow without bound in the label (DCG's ``2^label - 1``)."""
    if not isinstance(preds, Tensor):
        return None
    dtype = working_dtype(preds)
    declared = [(getattr(measure, "label_limit", None), params) for measure, _, params in requests]
    limits = [limit_of(params, dtype) for limit_of, params in declared if limit_of is not None]
    return min([limit for limit in limits if limit is not None], default=None)  # a list: torch.compile takes it


def deepest(ks: Sequence[int | None]) -> int | None:
    """The deepest rank the cut-offs read: None when one of them is the whole list."""
    return None if None in ks else max(ks)


def finalize(
    values: Tensor, no_relevant: Tensor, inputs: RankingInput, empty_target_action: str, reduction: str,
    k_is_sequence: bool,
) -> Tensor:
    """Score queries without relevant items (``no_relevant`` ``[Q]``, or ``[Q, K]``), then reduce ``values`` ``[Q, K]``
    to ``[*batch_shape, K]`` (``"none"``) or ``[K]``; K dropped unless ``k_is_sequence``."""
    if empty_target_action == "error" and bool(no_relevant.any()):
        raise ValueError(_EMPTY_ERROR)
    fill = {"neg": 0.0, "pos": 1.0, "skip": float("nan"), "error": 0.0}[empty_target_action]
    values = values.masked_fill(no_relevant.unsqueeze(1) if no_relevant.ndim == 1 else no_relevant, fill)
    out = reduce_queries(values, reduction, inputs.batch_shape)
    return out if k_is_sequence else out[..., 0]


def _fused_per_query(
    requests: Requests, preds: Tensor, target: Tensor, mask: Tensor | None, ideal_target: Tensor | None,
    backend: Backend, ties: str, empty_target_action: str, relevance_threshold: float, validate_args: bool,
) -> Tensor | None:
    """Per-query values ``[..., K]`` of dense ``requests`` from ``backend``'s fused kernel; None where it has none or
    it does not cover a measure, option or input."""
    found = [fused_columns(measure, ks, params) for measure, ks, params in requests]
    if None in found:
        return None
    columns = [column for family in found for column in family or ()]
    fused = backend.fused(
        preds, target, columns, mask=mask, ideal_target=ideal_target, ties=ties,
        relevance_threshold=relevance_threshold, empty_target_action=empty_target_action, check_values=validate_args,
    )
    if fused is None:
        return None
    values, empty, mixed, problems = fused
    if problems is not None:  # the kernel's first four value checks, then ours
        report_value_problems(torch.cat([problems, unfused_value_problems(
            target, ideal_target, label_limit=label_limit(requests, preds), mask=mask)]))
    if empty is not None and bool(empty.any()):
        raise ValueError(_EMPTY_ERROR)
    if mixed is not None:  # ERR of lists whose tie groups hold different labels: their rows by the torch backend
        values = _err_of_mixed_ties(values, mixed, requests, preds, target, mask, ideal_target, empty_target_action,
                                    relevance_threshold)
    return values.reshape(*preds.shape[:-1], len(columns))


def _err_of_mixed_ties(
    values: Tensor, mixed: Tensor, requests: Requests, preds: Tensor, target: Tensor, mask: Tensor | None,
    ideal_target: Tensor | None, empty_target_action: str, relevance_threshold: float,
) -> Tensor:
    """``values`` with the ERR columns of the ``mixed`` rows by the torch backend under ``"average"``: one host read
    (which rows), the device backends' documented exception."""
    rows = mixed.nonzero().squeeze(1)
    if rows.numel() == 0:
        return values
    preds, target = (x.reshape(-1, x.shape[-1])[rows] for x in (preds, target))
    mask, ideal_target = (None if x is None else x.reshape(-1, x.shape[-1])[rows] for x in (mask, ideal_target))
    column = 0
    for measure, ks, params in requests:
        if fused_code(measure, params) == ERR:
            with use_backend("torch"):
                err = per_query_values(
                    [(measure, ks, params)], preds, target, indexes=None, mask=mask, ideal_target=ideal_target,
                    judged=None, ties="average", empty_target_action=empty_target_action,
                    relevance_threshold=relevance_threshold, validate_args=False,
                )
            values[rows, column : column + len(ks)] = err.to(values.dtype)
        column += len(ks)
    return values


_EMPTY_ERROR = ("A query has no relevant item and `empty_target_action='error'`; pass 'neg', 'pos' or 'skip' to "
                "score such queries.")
