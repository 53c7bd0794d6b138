"""Lesson 13's smallest failing examples (grader/judge/smallest.py): which fresh inputs each
part is tried on, smallest first, how two outputs are compared, and the lines of the
snippet that call the student's function. Shipped in the student bundle (fresh inputs only)."""
from __future__ import annotations

from collections.abc import Callable

import torch

from grader.judge.smallest import Example, generator, literal, rounded

MODULE = "13_moe"     # what the snippet imports: the student's file, next to it
MAX_SIDE = 3          # each of tokens, experts, H, I tried up to this
REDRAWS = 8           # dispatch's routings drawn at most, for one where slots differ
LOADS = {"ffn", "moe"}  # parts whose snippet loads weights into a layer (smallest.LOAD)
# course.yml's `aux` tolerance: the reference rounds the load fractions to float32
# (MiniMind's .float()), so a correct loss counted in float64 differs in the 8th digit
AUX = {"float64": (1.0e-9, 1.0e-5)}
TOLERANCES = {("aux_loss", "aux"): AUX, ("aux_loss", "scores_grad"): AUX, ("moe", "aux"): AUX}
# the loss's gradient, shown where its value is right and only its gradient is not
GRADIENTS = {"aux_loss": {"scores_grad": "scores.grad"},
             "dispatch": {"x_grad": "x_flat.grad", "weight_grad": "topk_weight.grad"}}
# with one expert every score is 1, as is the load: the line-of-divergence search
# cannot tell a cut score from the load that equals it, and names no line
GRADIENTS_FROM = {"aux_loss": {"E": 2}}


def _ffn(s: dict) -> dict:
    g = generator(1, s["H"], s["I"])
    h, i = s["H"], s["I"]
    state = {"gate_proj.weight": rounded(g, i, h), "up_proj.weight": rounded(g, i, h),
             "down_proj.weight": rounded(g, h, i)}
    x = rounded(g, 1, s["N"], h)
    return dict(hidden=h, inter=i, state=state, x=x, gy=torch.zeros_like(x))


def _route(s: dict) -> dict | None:
    if s["K"] > s["E"]:
        return None
    g = generator(2, s["N"], s["E"], s["H"], s["K"], s["norm"])
    w, x = rounded(g, s["E"], s["H"]), rounded(g, s["N"], s["H"])
    probs = torch.softmax(x @ w.T, -1).sort(-1, descending=True).values
    if s["K"] < s["E"] and ((probs[:, s["K"] - 1] - probs[:, s["K"]]) < 1e-3).any():
        return None  # a near-tie: top-k would be arbitrary
    return dict(gate_weight=w, x_flat=x, k=s["K"], norm=bool(s["norm"]),
                g_scores=torch.zeros(s["N"], s["E"], dtype=torch.float64),
                g_weight=torch.zeros(s["N"], s["E"], dtype=torch.float64))


def _routing(g, n: int, e: int, k: int) -> torch.Tensor:
    return torch.stack([torch.randperm(e, generator=g)[:k] for _ in range(n)])


def _slots_differ(idx: torch.Tensor) -> bool:
    """Some expert is in one slot for one token and in another slot for another: only
    then does a dispatch that pairs weights and tokens in different orders (slot by
    slot against token by token) give other results than the reference's."""
    return any(len(set((idx == e).nonzero()[:, 1].tolist())) > 1 for e in idx.unique())


def _dispatch(s: dict) -> dict | None:
    if s["K"] > s["E"]:
        return None
    g = generator(3, s["N"], s["E"], s["H"], s["I"], s["K"])
    h, i = s["H"], s["I"]
    experts = [(rounded(g, i, h), rounded(g, i, h), rounded(g, h, i)) for _ in range(s["E"])]
    idx = _routing(g, s["N"], s["E"], s["K"])
    for _ in range(REDRAWS):  # with two tokens and K >= 2, tokens can be mixed up
        if s["N"] < 2 or s["K"] < 2 or _slots_differ(idx):
            break
        idx = _routing(g, s["N"], s["E"], s["K"])
    weight = torch.round(torch.rand(s["N"], s["K"], generator=g, dtype=torch.float64)
                         * 100) / 100 + 0.1
    x = rounded(g, s["N"], h)
    return dict(expert_weights=experts, x_flat=x, topk_weight=weight, topk_idx=idx,
                gy=rounded(g, s["N"], h), grads=True)  # gy: the backward pass's, shown


def _aux(s: dict) -> dict | None:
    if s["K"] > s["E"]:
        return None
    g = generator(4, s["N"], s["E"], s["K"])
    scores = torch.softmax(rounded(g, s["N"], s["E"]) * 2, -1)
    return dict(scores=scores, topk_idx=_routing(g, s["N"], s["E"], s["K"]),
                num_experts=s["E"], coef=1.0 if not s["coef"] else 0.5)


def _moe(s: dict) -> dict | None:
    """B sequences of N tokens each: the router sees their B·N tokens."""
    route = _route({**s, "N": s["B"] * s["N"], "norm": 1})
    if route is None:
        return None
    g = generator(5, s["N"], s["E"], s["H"], s["I"], s["K"])
    h, i = s["H"], s["I"]
    state = {"gate.weight": route["gate_weight"]}
    for e in range(s["E"]):
        state.update({f"experts.{e}.gate_proj.weight": rounded(g, i, h),
                      f"experts.{e}.up_proj.weight": rounded(g, i, h),
                      f"experts.{e}.down_proj.weight": rounded(g, h, i)})
    x = route["x_flat"].reshape(s["B"], s["N"], h)
    return dict(hidden=h, inter=i, num_experts=s["E"], k=s["K"], norm=True, coef=1.0,
                state=state, x=x, gy=torch.zeros_like(x), train=not s["eval"], grads=False)


# part -> (probe, size names, maker, outputs compared)
# flags (norm, a coefficient other than 1, eval mode) count as one more "size"; B: the
# layer's batch (sequences), where tokens of different sequences could be mixed up
ONE = dict(N=1, E=1, K=1, H=1, I=1, norm=0, coef=0, eval=0, B=1)
HIGH = dict(N=MAX_SIDE, E=MAX_SIDE, K=MAX_SIDE, H=MAX_SIDE, I=MAX_SIDE, norm=1, coef=1, eval=1,
            B=2)
PARTS: dict[str, tuple[str, tuple[str, ...], Callable[[dict], dict | None], list[str]]] = {
    "ffn": ("ffn_forward", ("N", "H", "I"), _ffn, ["y"]),
    "router": ("route", ("N", "E", "K", "H", "norm"), _route,
               ["scores", "topk_weight", "topk_idx"]),
    "dispatch": ("dispatch", ("N", "E", "K", "H", "I"), _dispatch, ["y"]),
    "aux_loss": ("aux_loss", ("N", "E", "K", "coef"), _aux, ["aux"]),
    "moe": ("moe", ("N", "E", "K", "H", "I", "eval", "B"), _moe, ["y", "aux"]),
}


def canonical(out: dict) -> dict:
    """Top-k compared as sets: each token's slots sorted by expert id."""
    idx, w = out.get("topk_idx"), out.get("topk_weight")
    if isinstance(idx, torch.Tensor) and isinstance(w, torch.Tensor) and idx.shape == w.shape \
            and idx.dim() == 2:
        order = idx.argsort(dim=-1)
        return {**out, "topk_idx": idx.gather(-1, order), "topk_weight": w.gather(-1, order)}
    return out


def lines(example: Example) -> list[str]:
    """The snippet's lines that build the part's inputs and call the student's function
    (`m`, their module; `state` and `load` already defined for a part in LOADS)."""
    a = example.args
    lines: list[str] = []
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
        call = "m.dispatch(x_flat, experts, topk_weight, topk_idx)"
        if "x_grad" not in example.outputs:
            lines += ["])", f"x_flat = {literal(a['x_flat'])}",
                      f"topk_weight = {literal(a['topk_weight'])}",
                      f"topk_idx = {literal(a['topk_idx'])}", f"print({call})"]
        else:  # its gradients: the probe's backward pass of (y * gy).sum()
            lines += ["])", f"x_flat = {literal(a['x_flat'])}.requires_grad_()",
                      f"topk_weight = {literal(a['topk_weight'])}.requires_grad_()",
                      f"topk_idx = {literal(a['topk_idx'])}", f"gy = {literal(a['gy'])}",
                      f"y = {call}", "print(y)",
                      "if y.requires_grad:  # as the grader does: backward only where the "
                      "result carries a gradient",
                      "    (y * gy).sum().backward()", "print(x_flat.grad)",
                      "print(topk_weight.grad)"]
    elif example.part == "aux_loss":
        call = f"m.load_balancing_loss(scores, topk_idx, {a['num_experts']}, {a['coef']})"
        if "scores_grad" not in example.outputs:
            lines += [f"scores = {literal(a['scores'])}",
                      f"topk_idx = {literal(a['topk_idx'])}", f"print({call})"]
        else:  # its gradient: the probe's backward pass
            lines += [f"scores = {literal(a['scores'])}.requires_grad_()",
                      f"topk_idx = {literal(a['topk_idx'])}", f"aux = {call}", "print(aux)",
                      "if aux.requires_grad:  # as the grader does: backward only where the result "
                      "carries a gradient",
                      "    aux.backward()", "print(scores.grad)"]
    else:  # moe
        lines += [f"layer = m.MOEFeedForward({a['hidden']}, {a['inter']}, "
                  f"num_experts={a['num_experts']}, num_experts_per_tok={a['k']}, "
                  f"norm_topk_prob={a['norm']}, router_aux_loss_coef={a['coef']}).double()",
                  f"layer.train({a['train']})", "load(layer, state)",
                  f"x = {literal(a['x'])}", "print(layer(x))", "print(layer.aux_loss)"]
    return lines
