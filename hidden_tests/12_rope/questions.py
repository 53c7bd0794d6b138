"""Lesson 12's questions (grader/judge/questions.py): for a failing part no known mistake
explains, what the student's function is asked on fresh inputs: whether rope_base,
rope_scaling, sin, cos or the KV cache has any effect, and whether float64 q and k stay
float64. Inputs are made by examples.py's makers at sizes its smallest examples never
try (beyond its HIGH), from its fresh seeds: no graded case. Shipped in the student bundle
(fresh inputs only)."""
from __future__ import annotations

from pathlib import Path

from grader.judge.questions import Question
from grader.judge.smallest import load

EXAMPLES = load(Path(__file__).parent)
TRIES = 20  # sizes tried for one round (a YaRN ramp end at a jump skips one)


def _made(part: str, i: int, **fixed: int) -> dict | None:
    """examples.py's input for `part` on round i, at sizes beyond its smallest
    examples', another size each round."""
    high = EXAMPLES.HIGH
    for j in range(TRIES):
        sizes = {**dict(D=high["D"] + 1 + i + j, P=high["P"] + 2 + i + j, kind=0,
                        S=high["S"] + 1 + i + j, H=high["H"] + 1, bf16=0, layout=0,
                        past=high["past"] + 1 + i + j), **fixed}
        args = EXAMPLES.PARTS[part][2](sizes)
        if args is not None:
            return args
    return None


def _changed(args: dict | None, name: str, new) -> tuple[dict, dict] | None:
    return None if args is None else (args, {**args, name: new(args)})


QUESTIONS: dict[str, list[Question]] = {
    "freqs": [
        Question("ignores", "precompute_freqs_cis", "freqs", ("cos", "sin"),
                 lambda i: _changed(_made("freqs", i), "rope_base",
                                    lambda a: a["rope_base"] * 100), argument="rope_base"),
        Question("ignores", "precompute_freqs_cis", "freqs", ("cos", "sin"),
                 lambda i: _changed(_made("freqs", i, kind=1), "rope_scaling",
                                    lambda a: None), argument="rope_scaling"),
    ],
    "apply": [
        Question("ignores", "apply_rotary_pos_emb", "apply", ("q", "k"),
                 lambda i: _changed(_made("apply", i), "sin", lambda a: a["sin"] * 0.5),
                 argument="sin"),
        Question("ignores", "apply_rotary_pos_emb", "apply", ("q", "k"),
                 lambda i: _changed(_made("apply", i), "cos", lambda a: a["cos"] * 0.5),
                 argument="cos"),
        Question("dtype", "apply_rotary_pos_emb", "apply", ("q", "k"),
                 lambda i: _made("apply", i)),
    ],
    "offset": [
        Question("ignores", "rope_position_embeddings", "offset", ("shape", "cos", "sin"),
                 lambda i: _changed(_made("offset", i), "past", lambda a: None),
                 argument="past_key_value"),
    ],
}
