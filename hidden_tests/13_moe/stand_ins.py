"""Lesson 13's stand-ins, the trusted side (grader/judge/standin.py; docs/design.md,
"Stand-ins"). Never shipped, never bound into the sandbox.

`PARTS` names, for each earlier part of the composite part `COMPOSITE`, the function
or class of the student's module a stand-in replaces (probes.py's `STAND_INS`).
`ANSWERS` computes each stand-in's outputs with the reference (the solution module
`m`) on whatever the child passed: the reference used as a library on inputs the
child chose, never a graded case. Each checks what it is given first, so a child
cannot make the trusted side compute something huge. `wiring_round` grades the
composite part's wiring on fresh inputs of the graded cases' shapes.
"""
from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.func import functional_call

from _moe_common import HIDDEN, check_moe, moe_args
from grader.inside.probekit import build
from grader.judge.standin import Refused

COMPOSITE = "moe"
PARTS = {"ffn": "FeedForward", "router": "route", "dispatch": "dispatch",
         "aux_loss": "load_balancing_loss"}
FLOATS = (torch.float32, torch.float64)
MAX_EXPERTS = 64


def _given(inputs: list, n: int, name: str) -> list[torch.Tensor]:
    if len(inputs) != n or any(t.dtype not in FLOATS for t in inputs):
        raise Refused(f"{name} takes {n} float32 or float64 tensors")
    if len({t.dtype for t in inputs}) != 1:
        raise Refused(f"{name}'s tensors must share one dtype")
    return inputs


def _index(given: dict, rows: int, experts: int) -> torch.Tensor:
    idx = given.get("topk_idx")
    if not (isinstance(idx, torch.Tensor) and idx.dtype == torch.int64 and idx.dim() == 2
            and idx.shape[0] == rows and idx.numel()
            and 0 <= int(idx.min()) and int(idx.max()) < experts):
        raise Refused("topk_idx must be int64 [N, K] with expert ids in range")
    return idx


def _ffn(m, inputs: list, given: dict) -> list[torch.Tensor]:
    x, gate, up, down = _given(inputs, 4, "FeedForward")
    inter, hidden = gate.shape if gate.dim() == 2 else (0, 0)
    if not (inter and up.shape == gate.shape and down.shape == (hidden, inter)
            and x.dim() >= 1 and x.shape[-1] == hidden):
        raise Refused("FeedForward's weights and input do not fit together")
    ffn = build(m.FeedForward, "FeedForward", hidden, inter).to(x.dtype)
    weights = {"gate_proj.weight": gate, "up_proj.weight": up, "down_proj.weight": down}
    return [functional_call(ffn, weights, (x,))]


class _Gate(nn.Module):
    """The gate the child's layer holds, as its weights (and bias) say."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None):
        super().__init__()
        self.w, self.b = weight, bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.linear(x, self.w, self.b)


def _route(m, inputs: list, given: dict) -> list[torch.Tensor]:
    x, weight, *bias = _given(inputs, len(inputs) if len(inputs) in (2, 3) else 0, "route")
    k = given.get("k")
    if not (x.dim() == 2 and weight.dim() == 2 and x.shape[1] == weight.shape[1]
            and 0 < weight.shape[0] <= MAX_EXPERTS
            and all(b.shape == weight.shape[:1] for b in bias)):
        raise Refused("route's input and gate do not fit together")
    if not (isinstance(k, int) and 1 <= k <= weight.shape[0]):
        raise Refused("route's num_experts_per_tok must be between 1 and num_experts")
    return list(m.route(x, _Gate(weight, bias[0] if bias else None), k,
                        bool(given.get("norm", True))))


class _Outputs(nn.Module):
    """Expert `e` as its outputs for every token, computed by the child: the input rows
    it is given carry the token ids (column 0), as the dispatch below makes them."""

    def __init__(self, outputs: torch.Tensor):
        super().__init__()
        self.outputs = outputs

    def forward(self, rows: torch.Tensor) -> torch.Tensor:
        return self.outputs[rows[:, 0].long()]


def _dispatch(m, inputs: list, given: dict) -> list[torch.Tensor]:
    outputs, weight = _given(inputs, 2, "dispatch")
    if not (outputs.dim() == 3 and 0 < outputs.shape[0] <= MAX_EXPERTS and weight.dim() == 2
            and weight.shape[0] == outputs.shape[1]):
        raise Refused("dispatch's expert outputs [E, N, H] and weights [N, K] do not fit")
    idx = _index(given, outputs.shape[1], outputs.shape[0])
    if idx.shape != weight.shape:
        raise Refused("topk_idx and topk_weight must have one shape")
    n, hidden = outputs.shape[1:]
    rows = torch.zeros(n, hidden, dtype=outputs.dtype)  # exact ids: n is far under 2**24
    rows[:, 0] = torch.arange(n, dtype=outputs.dtype)
    experts = nn.ModuleList([_Outputs(o) for o in outputs])
    return [m.dispatch(rows, experts, weight, idx)]


def _aux(m, inputs: list, given: dict) -> list[torch.Tensor]:
    (scores,) = _given(inputs, 1, "load_balancing_loss")
    experts, coef = given.get("num_experts"), given.get("coef")
    if not (scores.dim() == 2 and isinstance(experts, int) and experts == scores.shape[1]
            and experts <= MAX_EXPERTS and isinstance(coef, float)):
        raise Refused("load_balancing_loss's scores [N, E], num_experts and coef "
                         "do not fit together")
    return [m.load_balancing_loss(scores, _index(given, scores.shape[0], experts), experts,
                                  coef)]


ANSWERS = {"FeedForward": _ffn, "route": _route, "dispatch": _dispatch,
           "load_balancing_loss": _aux}


def wiring_round(student, reference, check, stood_in: list[str],
                 seed: Callable[[], int]) -> None:
    """The graded composite cases' shapes (test_moe.py), each on fresh inputs from
    `seed()`, with `stood_in` replaced by stand-ins in the student's module: the
    layer's outputs, aux loss, layout and gradients against the reference's."""
    from test_moe import CASES, EVAL_CASES, GRADIENT_CASES

    for case, train in [*((c, True) for c in CASES), *((c, False) for c in EVAL_CASES)]:
        e, k, norm, dtype, coef, b, s, hidden, inter, _ = case
        args = moe_args(seed(), dtype, b, s, e, hidden, inter, k, norm, coef, train,
                        train and case in GRADIENT_CASES)
        got = student.call("moe_stood_in", stood_in=stood_in, **args)
        ref = reference.call("moe", **args)
        check.true("layout", got["layout"] == ref["layout"], "the layer's layout differs")
        check_moe(check, got, ref, list)
        if args["grads"]:
            tol = "moe_gradient64" if dtype == "float64" else None
            check.grad("input gradient", got["x_grad"], ref["x_grad"], tol, axes=HIDDEN)
            check.grads("parameter gradient", got["grads"], ref["grads"], tol)
