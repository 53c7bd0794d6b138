"""Lesson 12's smallest failing examples (grader/judge/smallest.py): which fresh inputs each
part is tried on, smallest first, how two outputs are compared, and the lines of the
snippet that call the student's function. Shipped in the student bundle (fresh inputs only)."""
from __future__ import annotations

import math
from collections.abc import Callable

import torch

from grader.judge.smallest import SEED, Example, generator, literal, rounded

MODULE = "12_rope"  # what the snippet imports: the student's file, next to it
BASE = 100.0        # a small base: every frequency of a short table turns visibly
# YaRN scaled down to tables of a few rows: a table of 3 corrects the frequencies (one of
# 2 does not), with a ramp that (head dims 6 and 8) has values strictly between 0 and 1,
# and (8) beyond 1 before the clamp; beta_fast and beta_slow put the ramp's ends between
# whole numbers, away from where floor and ceil jump
YARN = {"original_max_position_embeddings": 2, "factor": 4, "beta_fast": 0.25,
        "beta_slow": 0.05, "attention_factor": 1.25}
# The tables are float32 (the contract): course.yml's float32 tolerance, far above what
# correct tables of a few rows differ by (~3.7e-8 per position). A rotation of bfloat16
# q and k: course.yml's `bfloat16` tolerance (correct code may round once more)
TABLE, ROTATION = {"float32": (1.0e-5, 1.0e-4)}, {"bfloat16": (0.4, 0.0)}
TOLERANCES = {("freqs", "cos"): TABLE, ("freqs", "sin"): TABLE,
              ("apply", "q"): ROTATION, ("apply", "k"): ROTATION}
SIXTEENTHS = 16     # table values in the rotation: exact in float32 and short to read


def _near_whole(x: float) -> bool:
    return abs(x - round(x)) < 0.01


def _freqs(s: dict) -> dict | None:
    """kind 0: `end` and a small base given; 1: the same with YaRN; 2: both left to
    their defaults (MiniMind's), the first rows of the 32k table shown."""
    dim, end, kind = 2 * s["D"], s["P"], s["kind"]
    if kind == 1:
        for beta in (YARN["beta_fast"], YARN["beta_slow"]):
            corr = dim * math.log(YARN["original_max_position_embeddings"]
                                  / (beta * 2 * math.pi)) / (2 * math.log(BASE))
            if _near_whole(corr):
                return None  # floor or ceil at a jump: any rounding moves the ramp
    return dict(dim=dim, rows=(0, end, 1), end=None if kind == 2 else end,
                rope_base=None if kind == 2 else BASE,
                rope_scaling=dict(YARN) if kind == 1 else None)


def _tables(g: torch.Generator, seq: int, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin rows [seq, dim] in the half-split layout, rounded to sixteenths."""
    angles = rounded(g, seq, dim // 2) * 2
    cos, sin = (torch.round(f(angles) * SIXTEENTHS) / SIXTEENTHS for f in (torch.cos, torch.sin))
    return (torch.cat([cos, cos], -1).float(), torch.cat([sin, sin], -1).float())


def _apply(s: dict) -> dict:
    g = generator(20, s["S"], s["D"], s["H"], s["bf16"], s["layout"])
    dim, dtype = 2 * s["D"], torch.bfloat16 if s["bf16"] else torch.float64
    q_shape, k_shape = (1, s["S"], s["H"], dim), (1, s["S"], 1, dim)
    if s["layout"]:  # [B, H, S, D] with unsqueeze_dim=0
        q_shape, k_shape = (1, s["H"], s["S"], dim), (1, 1, s["S"], dim)
    cos, sin = _tables(g, s["S"], dim)
    return dict(q=rounded(g, *q_shape).to(dtype), k=rounded(g, *k_shape).to(dtype),
                cos=cos, sin=sin, unsqueeze_dim=0 if s["layout"] else None)


def _offset(s: dict) -> dict:
    g = generator(21, s["S"], s["past"])
    seed = SEED + int(torch.randint(1 << 20, (1,), generator=g))  # far from every test's
    return dict(end=s["past"] + s["S"] + 1, dim=2, seed=seed, seq_length=s["S"],
                past=[1, s["past"], 1, 2] if s["past"] else None)


# part -> (probe, size names, maker, outputs compared); D: half the head dim, P: table
# rows, kind: plain, YaRN or the defaults (`_freqs`), H: q heads (k has one),
# bf16: q and k in bfloat16, layout: [B, H, S, D], past: tokens in the KV cache
ONE = dict(D=1, P=1, kind=0, S=1, H=1, bf16=0, layout=0, past=0)
HIGH = dict(D=4, P=3, kind=2, S=2, H=2, bf16=1, layout=1, past=3)
PARTS: dict[str, tuple[str, tuple[str, ...], Callable[[dict], dict | None], list[str]]] = {
    "freqs": ("freqs", ("D", "P", "kind"), _freqs, ["shape", "cos", "sin"]),
    "apply": ("apply", ("S", "D", "H", "bf16", "layout"), _apply, ["q", "k"]),
    "offset": ("offset", ("S", "past"), _offset, ["shape", "cos", "sin"]),
}


def _offset_tables(a: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """The probe's stand-in tables (probes._random_tables), to show as literals."""
    g = torch.Generator().manual_seed(a["seed"])
    return (torch.randn(a["end"], a["dim"], generator=g),
            torch.randn(a["end"], a["dim"], generator=g))


def lines(example: Example) -> list[str]:
    """The snippet's lines that build the part's inputs and call the student's function
    (`m`, their module), printing what is compared."""
    a = example.args
    shown = ["print([list(cos.shape), list(sin.shape)])"]
    if example.part == "freqs":
        kwargs = "".join(f", {k}={a[k]!r}" for k in ("end", "rope_base", "rope_scaling")
                         if a[k] is not None)
        start, stop, _ = a["rows"]
        return [f"cos, sin = m.precompute_freqs_cis({a['dim']}{kwargs})", *shown,
                f"print(cos[{start}:{stop}])", f"print(sin[{start}:{stop}])"]
    if example.part == "apply":
        extra = "" if a["unsqueeze_dim"] is None else f", unsqueeze_dim={a['unsqueeze_dim']}"
        return [f"q = {literal(a['q'])}", f"k = {literal(a['k'])}",
                f"cos = {literal(a['cos'])}", f"sin = {literal(a['sin'])}",
                f"q_embed, k_embed = m.apply_rotary_pos_emb(q, k, cos, sin{extra})",
                "print(q_embed)", "print(k_embed)"]
    freqs_cos, freqs_sin = _offset_tables(a)
    cache = "None"
    if a["past"] is not None:
        shape = ", ".join(map(str, a["past"]))
        cache = f"(torch.zeros({shape}), torch.zeros({shape}))  # a cached layer's k and v"
    return [f"freqs_cos = {literal(freqs_cos)}", f"freqs_sin = {literal(freqs_sin)}",
            f"past_key_value = {cache}",
            f"cos, sin = m.rope_position_embeddings(freqs_cos, freqs_sin, {a['seq_length']}, "
            "past_key_value)", *shown, "print(cos)", "print(sin)"]
