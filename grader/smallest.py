"""The smallest failing example of a part (lesson 13): a fresh input, never a graded
case, as small as it can be while the student's function still differs from the
reference, in float64, shown as a snippet the student can paste and run.

`smallest(part, student, reference)` tries candidate sizes from the smallest up (fewest
tokens, experts and K, then the smallest H and I) and returns the first on which the
two differ, as an `Example`. `student` and `reference` are callers with the probes'
`call(probe, **args)`: the student's runs only in the sandbox (the run's session), the
reference's on the trusted side. Inputs come from seeds no graded or practice case
uses (`SEED`), so the reference's numbers shown belong only to this fresh input.

`Example` is plain data on purpose: the line-of-divergence tracer (issue 27) runs on it.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch

SEED = 7_000_000      # fresh inputs: far from every graded and practice seed
ATOL, RTOL = 1e-10, 1e-8  # float64: correct re-orderings differ by ~1e-15
MAX_SIDE = 3          # each of tokens, experts, H, I tried up to this


@dataclass
class Example:
    """One fresh input on which the student's function differs from the reference.

    part: the lesson's part; probe: the probe function called; call: what the
    snippet calls (`m.load_balancing_loss(...)`); args: the probe's arguments
    (tensors in float64, sizes); sizes: the candidate's sizes by name; reference and
    student: each side's outputs (name -> tensor) for the names in `outputs`.
    """

    part: str
    probe: str
    args: dict
    sizes: dict
    outputs: list[str]
    reference: dict = field(default_factory=dict)
    student: dict = field(default_factory=dict)


def _g(*key: int) -> torch.Generator:
    return torch.Generator().manual_seed(SEED + hash(key) % 1_000_000)


def _randn(g, *shape) -> torch.Tensor:
    # two decimals: literals a student can read, exact in the snippet
    return torch.round(torch.randn(*shape, generator=g, dtype=torch.float64) * 100) / 100


def _candidates(names: tuple[str, ...], low: dict, high: dict) -> Iterator[dict]:
    """Sizes in order of their sum (smallest first), each within [low, high]."""
    ranges = [range(low[n], high[n] + 1) for n in names]
    for sizes in sorted(itertools.product(*ranges), key=lambda s: (sum(s), s)):
        yield dict(zip(names, sizes))


def _ffn(s: dict) -> dict:
    g = _g(1, s["H"], s["I"])
    h, i = s["H"], s["I"]
    state = {"gate_proj.weight": _randn(g, i, h), "up_proj.weight": _randn(g, i, h),
             "down_proj.weight": _randn(g, h, i)}
    x = _randn(g, 1, s["N"], h)
    return dict(hidden=h, inter=i, state=state, x=x, gy=torch.zeros_like(x))


def _route(s: dict) -> dict | None:
    if s["K"] > s["E"]:
        return None
    g = _g(2, s["N"], s["E"], s["H"], s["K"], s["norm"])
    w, x = _randn(g, s["E"], s["H"]), _randn(g, s["N"], s["H"])
    probs = torch.softmax(x @ w.T, -1).sort(-1, descending=True).values
    if s["K"] < s["E"] and ((probs[:, s["K"] - 1] - probs[:, s["K"]]) < 1e-3).any():
        return None  # a near-tie: top-k would be arbitrary
    return dict(gate_weight=w, x_flat=x, k=s["K"], norm=bool(s["norm"]),
                g_scores=torch.zeros(s["N"], s["E"], dtype=torch.float64),
                g_weight=torch.zeros(s["N"], s["E"], dtype=torch.float64))


def _routing(g, n: int, e: int, k: int) -> torch.Tensor:
    return torch.stack([torch.randperm(e, generator=g)[:k] for _ in range(n)])


def _dispatch(s: dict) -> dict | None:
    if s["K"] > s["E"]:
        return None
    g = _g(3, s["N"], s["E"], s["H"], s["I"], s["K"])
    h, i = s["H"], s["I"]
    experts = [(_randn(g, i, h), _randn(g, i, h), _randn(g, h, i)) for _ in range(s["E"])]
    idx = _routing(g, s["N"], s["E"], s["K"])
    weight = torch.round(torch.rand(s["N"], s["K"], generator=g, dtype=torch.float64)
                         * 100) / 100 + 0.1
    return dict(expert_weights=experts, x_flat=_randn(g, s["N"], h), topk_weight=weight,
                topk_idx=idx, gy=torch.zeros(s["N"], h, dtype=torch.float64), grads=False)


def _aux(s: dict) -> dict | None:
    if s["K"] > s["E"]:
        return None
    g = _g(4, s["N"], s["E"], s["K"])
    scores = torch.softmax(_randn(g, s["N"], s["E"]) * 2, -1)
    return dict(scores=scores, topk_idx=_routing(g, s["N"], s["E"], s["K"]),
                num_experts=s["E"], coef=1.0 if not s["coef"] else 0.5)


def _moe(s: dict) -> dict | None:
    route = _route({**s, "norm": 1})
    if route is None:
        return None
    g = _g(5, s["N"], s["E"], s["H"], s["I"], s["K"])
    h, i = s["H"], s["I"]
    state = {"gate.weight": route["gate_weight"]}
    for e in range(s["E"]):
        state.update({f"experts.{e}.gate_proj.weight": _randn(g, i, h),
                      f"experts.{e}.up_proj.weight": _randn(g, i, h),
                      f"experts.{e}.down_proj.weight": _randn(g, h, i)})
    x = route["x_flat"].reshape(1, s["N"], h)
    return dict(hidden=h, inter=i, num_experts=s["E"], k=s["K"], norm=True, coef=1.0,
                state=state, x=x, gy=torch.zeros_like(x), train=not s["eval"], grads=False)


# part -> (probe, size names, lowest sizes, maker, outputs compared)
# flags (norm, a coefficient other than 1, eval mode) count as one more "size"
ONE = dict(N=1, E=1, K=1, H=1, I=1, norm=0, coef=0, eval=0)
HIGH = dict(N=MAX_SIDE, E=MAX_SIDE, K=MAX_SIDE, H=MAX_SIDE, I=MAX_SIDE, norm=1, coef=1, eval=1)
PARTS: dict[str, tuple[str, tuple[str, ...], Callable[[dict], dict | None], list[str]]] = {
    "ffn": ("ffn_forward", ("N", "H", "I"), _ffn, ["y"]),
    "router": ("route", ("N", "E", "K", "H", "norm"), _route,
               ["scores", "topk_weight", "topk_idx"]),
    "dispatch": ("dispatch", ("N", "E", "K", "H", "I"), _dispatch, ["y"]),
    "aux_loss": ("aux_loss", ("N", "E", "K", "coef"), _aux, ["aux"]),
    "moe": ("moe", ("N", "E", "K", "H", "I", "eval"), _moe, ["y", "aux"]),
}


def _sets(out: dict) -> dict:
    """Top-k compared as sets: each token's slots sorted by expert id."""
    idx, w = out.get("topk_idx"), out.get("topk_weight")
    if isinstance(idx, torch.Tensor) and isinstance(w, torch.Tensor) and idx.shape == w.shape \
            and idx.dim() == 2:
        order = idx.argsort(dim=-1)
        return {**out, "topk_idx": idx.gather(-1, order), "topk_weight": w.gather(-1, order)}
    return out


def differs(got: object, ref: object) -> bool:
    """One output of the two sides, as the checks compare it (float64 tolerances)."""
    if not isinstance(got, torch.Tensor) or not isinstance(ref, torch.Tensor):
        return True
    if got.shape != ref.shape or got.dtype != ref.dtype:
        return True
    if not ref.is_floating_point():
        return not torch.equal(got, ref)
    return not torch.allclose(got, ref, atol=ATOL, rtol=RTOL, equal_nan=True)


def smallest(part: str, student, reference) -> Example | None:
    """The smallest fresh input on which `student` differs from `reference` in `part`,
    or None when none of the candidates tells them apart (or the part is unknown).
    The student's call raising counts as differing (its error is the student's)."""
    if part not in PARTS:
        return None
    probe, names, make, outputs = PARTS[part]
    for tried, sizes in enumerate(_candidates(names, ONE, HIGH)):
        if tried >= MAX_TRIES:
            return None
        args = make(sizes)
        if args is None:
            continue
        ref = _sets(reference.call(probe, **args))
        try:
            got = _sets(student.call(probe, **args))
        except Exception as exc:  # noqa: BLE001 - the student's error, shown as such
            got = {"error": f"{type(exc).__name__}: {exc}"[:300]}
        if "error" in got or any(differs(got.get(o), ref.get(o)) for o in outputs):
            return Example(part, probe, args, sizes, outputs,
                           {o: ref.get(o) for o in outputs},
                           {o: got.get(o) for o in outputs} if "error" not in got
                           else {"error": got["error"]})
    return None


# ---- the snippet ---------------------------------------------------------------------

def literal(t: torch.Tensor) -> str:
    """A tensor as a `torch.tensor(...)` literal that rebuilds it exactly."""
    if t.is_floating_point():
        values = _nested(t.tolist(), lambda v: repr(float(v)) if math.isfinite(v)
                         else f"float('{v}')")
        return f"torch.tensor({values}, dtype=torch.{str(t.dtype).removeprefix('torch.')})"
    return f"torch.tensor({_nested(t.tolist(), str)})"


def _nested(v, fmt) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(_nested(x, fmt) for x in v) + "]"
    return fmt(v)


def _shown(value: object) -> str:
    if isinstance(value, torch.Tensor):
        return literal(value.detach())
    return repr(value)


# How the grader loads a layer (grader/probekit.load): the reference's weights by name,
# and fixed non-zero values for whatever else the layer holds (a bias, a shared expert).
LOAD = [
    "def load(module, state):",
    "    with torch.no_grad():",
    "        for name, p in [*module.named_parameters(), *module.named_buffers()]:",
    "            if name in state:",
    "                p.copy_(state[name])",
    "            elif p.is_floating_point():  # as the grader fills what the reference lacks",
    "                g = torch.Generator().manual_seed(zlib.crc32(name.encode()))",
    "                p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * 0.5)",
]


def snippet(example: Example, module: str = "13_moe") -> str:
    """Python the student pastes next to their file and runs: the inputs and weights
    as literals, the call, then the reference's output and theirs as comments."""
    a = example.args
    lines = ["import importlib", "import torch", "",
             "torch.set_printoptions(precision=17)  # every digit, as in the comments below",
             f'm = importlib.import_module("{module}")']
    if example.part in ("ffn", "moe"):
        lines[:2] = ["import importlib", "import zlib", "", "import torch"]
        lines += ["", *LOAD, "", "state = {"]
        lines += [f"    {k!r}: {literal(v)}," for k, v in a["state"].items()]
        lines += ["}"]
    if example.part == "ffn":
        lines += [f"ffn = m.FeedForward({a['hidden']}, {a['inter']}).double()",
                  "load(ffn, state)", f"x = {literal(a['x'])}", "print(ffn(x))"]
    elif example.part == "router":
        lines += [f"gate = torch.nn.Linear({a['x_flat'].shape[1]}, "
                  f"{a['gate_weight'].shape[0]}, bias=False).double()",
                  "with torch.no_grad():",
                  f"    gate.weight.copy_({literal(a['gate_weight'])})",
                  f"x_flat = {literal(a['x_flat'])}",
                  f"print(m.route(x_flat, gate, {a['k']}, {a['norm']}))"]
    elif example.part == "dispatch":
        lines += ["", "class Expert(torch.nn.Module):  # as the grader's: tanh-gated",
                  "    def __init__(self, gate, up, down):",
                  "        super().__init__()",
                  "        self.gate_proj, self.up_proj, self.down_proj = (",
                  "            torch.nn.Linear(w.shape[1], w.shape[0], bias=False).double()",
                  "            for w in (gate, up, down))",
                  "        with torch.no_grad():",
                  "            for layer, w in zip((self.gate_proj, self.up_proj, "
                  "self.down_proj), (gate, up, down)):",
                  "                layer.weight.copy_(w)",
                  "        self.act_fn = torch.tanh", "",
                  "    def forward(self, x):",
                  "        return self.down_proj(self.act_fn(self.gate_proj(x)) "
                  "* self.up_proj(x))", "",
                  "experts = torch.nn.ModuleList(["]
        lines += [f"    Expert({', '.join(literal(w) for w in ws)})," for ws in a["expert_weights"]]
        lines += ["])", f"x_flat = {literal(a['x_flat'])}",
                  f"topk_weight = {literal(a['topk_weight'])}",
                  f"topk_idx = {literal(a['topk_idx'])}",
                  "print(m.dispatch(x_flat, experts, topk_weight, topk_idx))"]
    elif example.part == "aux_loss":
        lines += [f"scores = {literal(a['scores'])}", f"topk_idx = {literal(a['topk_idx'])}",
                  f"print(m.load_balancing_loss(scores, topk_idx, {a['num_experts']}, "
                  f"{a['coef']}))"]
    else:  # moe
        lines += [f"layer = m.MOEFeedForward({a['hidden']}, {a['inter']}, "
                  f"num_experts={a['num_experts']}, num_experts_per_tok={a['k']}, "
                  f"norm_topk_prob={a['norm']}, router_aux_loss_coef={a['coef']}).double()",
                  f"layer.train({a['train']})", "load(layer, state)",
                  f"x = {literal(a['x'])}", "print(layer(x))", "print(layer.aux_loss)"]
    lines += ["", "# the reference gives:"]
    lines += [f"#   {o} = {_shown(example.reference.get(o))}" for o in example.outputs]
    lines += ["# yours gives:"]
    if "error" in example.student:
        lines += [f"#   {example.student['error']}"]
    else:
        lines += [f"#   {o} = {_shown(example.student.get(o))}" for o in example.outputs]
    return "\n".join(lines) + "\n"


MAX_TRIES = 40    # candidates tried per part: a bound on the student's extra calls


def snippets(probes: object, failing: list[str], student, reference) -> dict[str, str]:
    """Per failing part of a lesson whose probes are lesson 13's, its smallest example's
    snippet (none where no candidate tells the two apart). The student's calls go
    through the run's session: its limits hold, and an error there ends the search."""
    if not all(hasattr(probes, PARTS[p][0]) for p in PARTS):
        return {}
    out: dict[str, str] = {}
    for part in failing:
        example = smallest(part, student, reference)
        if example is not None:
            out[part] = snippet(example)
    return out
