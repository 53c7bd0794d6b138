"""Write tests/fixtures/divergence/<lesson>.yml: single-line in-place mistakes of each
lesson's solution, with the line edited and the part whose function it is in.

The audit's mutants (grader/author/audit) whose change is one line and that the lesson's
equivalents file does not list, plus the hand-written ones below (mistakes students
make). A mistake is kept when it changes its part's results on the fresh traced
input (the lesson's trace_inputs.py) and raises nowhere there (a traceback names its
line already), computed here on trusted code: the corpus test then
checks what the page says about each.

    .venv/bin/python scripts/divergence_corpus.py
"""
from __future__ import annotations

import ast
import sys
import types
from pathlib import Path

import torch
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader.judge import divergence, trace_inputs  # noqa: E402
from grader.lesson import equivalents, mutants  # noqa: E402
from grader.config import load as load_course  # noqa: E402
from grader.judge.reference import load_file  # noqa: E402

LESSONS = {"10": "10_rmsnorm", "11": "11_attention", "12": "12_rope", "13": "13_moe"}
PARTS = {
    "10": {"RMSNorm": "norm"},
    "11": {"repeat_kv": "repeat_kv", "mask_scores": "mask", "attention": "attention"},
    "12": {"precompute_freqs_cis": "freqs", "apply_rotary_pos_emb": "apply",
           "rope_position_embeddings": "offset"},
    "13": {"FeedForward": "ffn", "route": "router", "dispatch": "dispatch",
           "load_balancing_loss": "aux_loss", "MOEFeedForward": "moe"},
}
# (the line as written, the line as a student wrote it, why): mistakes students make
HAND = {
    "13": [
        ("return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))",
         "return self.down_proj(self.act_fn(self.gate_proj(x)) + self.up_proj(x))",
         "+ for * in SwiGLU"),
        ("return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))",
         "return self.down_proj(self.act_fn(self.up_proj(x)) * self.gate_proj(x))",
         "gate and up swapped"),
        ("scores = F.softmax(gate(x_flat), dim=-1)",
         "scores = F.softmax(gate(x_flat) / 2.0, dim=-1)", "a temperature in the softmax"),
        ("scores = F.softmax(gate(x_flat), dim=-1)",
         "scores = F.softmax(gate(x_flat), dim=0)", "softmax over tokens"),
        ("scores = F.softmax(gate(x_flat), dim=-1)",
         "scores = torch.sigmoid(gate(x_flat))", "sigmoid for softmax"),
        ("topk_weight = topk_weight / (topk_weight.sum(dim=-1, keepdim=True) + 1e-20)",
         "topk_weight = topk_weight / topk_weight.max(dim=-1, keepdim=True).values",
         "renormalising by the max"),
        ("topk_weight = topk_weight / (topk_weight.sum(dim=-1, keepdim=True) + 1e-20)",
         "topk_weight = topk_weight / topk_weight.sum()", "renormalising over all tokens"),
        ("topk_weight = topk_weight / (topk_weight.sum(dim=-1, keepdim=True) + 1e-20)",
         "topk_weight = topk_weight.softmax(dim=-1)", "a softmax again"),
        ("y = torch.zeros_like(x_flat)", "y = torch.ones_like(x_flat)",
         "ones_like for zeros_like"),
        ("weight = topk_weight[mask].view(-1, 1)", "weight = topk_weight[mask].view(-1, 1).sqrt()",
         ".sqrt() on the dispatch weight"),
        ("weight = topk_weight[mask].view(-1, 1)", "weight = topk_weight[mask].view(-1, 1) ** 2",
         "the weight squared"),
        ("y.index_add_(0, token_idx, (expert(x_flat[token_idx]) * weight).to(y.dtype))",
         "y.index_add_(0, token_idx, expert(x_flat[token_idx]).to(y.dtype))",
         "the weight forgotten"),
        ("load = F.one_hot(topk_idx, num_experts).float().mean(0)",
         "load = F.one_hot(topk_idx, num_experts).float().sum(0)", "counts, not fractions"),
        ("return (load * scores.mean(0)).sum() * num_experts * router_aux_loss_coef",
         "return (load * scores.mean(0)).mean() * num_experts * router_aux_loss_coef",
         ".mean() for .sum() in the loss"),
        ("return (load * scores.mean(0)).sum() * num_experts * router_aux_loss_coef",
         "return (load * scores.sum(0)).sum() * num_experts * router_aux_loss_coef",
         "scores summed over tokens"),
        ("return (load * scores.mean(0)).sum() * num_experts * router_aux_loss_coef",
         "return (load * scores.mean(0)).sum() * router_aux_loss_coef", "E forgotten"),
        ("x_flat = x.view(-1, hidden_dim)", "x_flat = x.transpose(0, 1).reshape(-1, hidden_dim)",
         "tokens flattened after a transpose"),
        ("y = dispatch(x_flat, self.experts, topk_weight, topk_idx)",
         "y = dispatch(x_flat, self.experts, topk_weight.detach(), topk_idx)", "a detach"),
        ("scores = F.softmax(gate(x_flat), dim=-1)",
         "scores = F.softmax(gate(x_flat), dim=-1).detach()", "the scores detached"),
        ("scores = F.softmax(gate(x_flat), dim=-1)",
         "with torch.no_grad(): scores = F.softmax(gate(x_flat), dim=-1)",
         "the router under no_grad"),
        ("topk_weight, topk_idx = torch.topk(scores, k=num_experts_per_tok, dim=-1, sorted=False)",
         "topk_weight, topk_idx = torch.topk(scores.data, k=num_experts_per_tok, dim=-1, "
         "sorted=False)", ".data before top-k"),
        ("weight = topk_weight[mask].view(-1, 1)", "weight = topk_weight[mask].view(-1, 1).detach()",
         "the dispatch weight detached"),
        ("y.index_add_(0, token_idx, (expert(x_flat[token_idx]) * weight).to(y.dtype))",
         "y.index_add_(0, token_idx, (expert(x_flat[token_idx].detach()) * weight).to(y.dtype))",
         "the expert's input detached"),
        ("return (load * scores.mean(0)).sum() * num_experts * router_aux_loss_coef",
         "return (load * scores.detach().mean(0)).sum() * num_experts * router_aux_loss_coef",
         "the loss's scores detached"),
        ("x_flat = x.view(-1, hidden_dim)", "x_flat = x.view(-1, hidden_dim).detach()",
         "the layer's input detached"),
        ("y = dispatch(x_flat, self.experts, topk_weight, topk_idx)",
         "with torch.no_grad(): y = dispatch(x_flat, self.experts, topk_weight, topk_idx)",
         "dispatch under no_grad"),
        # K >= 2 only: weights and tokens paired in different orders (slot by slot
        # against token by token), so one token's weight lands on another token
        ("weight = topk_weight[mask].view(-1, 1)", "weight = topk_weight.T[mask.T].view(-1, 1)",
         "the weights taken slot by slot, the tokens in order"),
        ("token_idx = mask.any(dim=-1).nonzero().flatten()",
         "token_idx = mask.T.nonzero()[:, 1]", "the tokens listed slot by slot"),
    ],
    "10": [
        ("normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)",
         "normed = xf * torch.rsqrt(xf.pow(2).sum(-1, keepdim=True) + self.eps)", "sum for mean"),
        ("normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)",
         "normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True)) + self.eps",
         "eps outside the root"),
        ("normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)",
         "normed = xf / torch.sqrt(xf.abs().mean(-1, keepdim=True) + self.eps)",
         "abs for the square"),
        ("return self.weight * normed.type_as(x)", "return self.weight + normed.type_as(x)",
         "+ for *"),
        ("normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)",
         "normed = xf * torch.rsqrt(xf.pow(2).mean(0, keepdim=True) + self.eps)",
         "over the batch"),
        ("xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x",
         "xf = x", "no float32 for half precision"),
        ("xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x",
         "xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x.detach()",
         "the input detached"),
        ("normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)",
         "normed = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).detach()",
         "the normalised values detached"),
        ("return self.weight * normed.type_as(x)", "return self.weight.data * normed.type_as(x)",
         ".data on the weight"),
    ],
    "11": [
        ("device=scores.device).triu(1)", "device=scores.device).triu(0)",
         "the diagonal masked"),
        ("scores += (1.0 - attention_mask.unsqueeze(1).unsqueeze(2)) * -1e9",
         "scores += (1.0 - attention_mask.unsqueeze(1).unsqueeze(2)) * 1e9", "padding sign"),
        ("scores = (xq @ xk.transpose(-2, -1)) / math.sqrt(head_dim)",
         "scores = (xq @ xk.transpose(-2, -1)) / head_dim", "scaled by D, not sqrt(D)"),
        ("output = F.softmax(scores.float(), dim=-1).type_as(xq) @ xv",
         "output = F.softmax(scores.float(), dim=-2).type_as(xq) @ xv", "softmax over queries"),
        ("return output.transpose(1, 2).reshape(bsz, seq_len, -1)",
         "return output.reshape(bsz, seq_len, -1)", "heads not moved back"),
        ("n_rep = n_heads // xk.shape[2]", "n_rep = n_heads // xk.shape[1]",
         "repeats from the wrong dim"),
        ("scores = (xq @ xk.transpose(-2, -1)) / math.sqrt(head_dim)",
         "scores = (xq @ xk.transpose(-2, -1)).detach() / math.sqrt(head_dim)",
         "the scores detached"),
        ("output = F.softmax(scores.float(), dim=-1).type_as(xq) @ xv",
         "output = F.softmax(scores.float(), dim=-1).type_as(xq) @ xv.detach()",
         "the values detached"),
        ("output = F.softmax(scores.float(), dim=-1).type_as(xq) @ xv",
         "with torch.no_grad(): output = F.softmax(scores.float(), dim=-1).type_as(xq) @ xv",
         "the output under no_grad"),
    ],
    "12": [
        ("freqs = 1.0 / (rope_base ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))",
         "freqs = 1.0 / (rope_base ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / (dim // 2)))",
         "exponent over dim/2"),
        ("freqs = torch.outer(t, freqs).float()", "freqs = torch.outer(t + 1, freqs).float()",
         "positions from 1"),
        ("freqs_cos = torch.cat([torch.cos(freqs), torch.cos(freqs)], dim=-1) * attn_factor",
         "freqs_cos = torch.cat([torch.cos(freqs), torch.sin(freqs)], dim=-1) * attn_factor",
         "cos and sin mixed"),
        ("start_pos = past_key_value[0].shape[1] if past_key_value is not None else 0",
         "start_pos = past_key_value[0].shape[2] if past_key_value is not None else 0",
         "cache length from the heads"),
        ("return (freqs_cos[start_pos:start_pos + seq_length],",
         "return (freqs_cos[start_pos:seq_length],", "end not offset"),
        ("freqs = freqs * (1 - ramp + ramp / factor)", "freqs = freqs * (1 - ramp + ramp * factor)",
         "YaRN factor inverted"),
    ],
}


def _function_of(tree: ast.Module, line: int) -> str | None:
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and \
                node.lineno <= line <= node.end_lineno:
            return node.name
    return None


def _differs(module: types.ModuleType, ref: types.ModuleType, probes, tests: Path,
             lesson: str, part: str, tols: dict) -> str:
    """What the mistake changes in the part's results on the traced inputs: "forward"
    (a value), "gradient" (only gradients: a gradient-only mistake) or "" (nothing).
    One that raises there is left out (""): its traceback already names the line."""
    differs = ""
    for probe, args in trace_inputs.fresh_inputs(tests, lesson, part):
        want = divergence.run_traced(ref, probes, probe, args)
        got = divergence.run_traced(module, probes, probe, args)
        if got.error:
            return ""
        if not divergence.same_forward(got.result, want.result, tols):
            differs = "forward"
        elif not _same_dtypes(got.result, want.result):
            differs = "forward"  # the same numbers in another dtype (an index as floats)
        elif not differs and not divergence.same_gradients(got.result, want.result, tols):
            differs = "gradient"
    return differs


def _same_dtypes(a: object, b: object) -> bool:
    """Two probe results hold tensors of the same dtypes, key by key."""
    if isinstance(a, dict) and isinstance(b, dict):
        return all(_same_dtypes(a.get(k), v) for k, v in b.items())
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return all(_same_dtypes(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.dtype == b.dtype
    return True


def _module(source: str, name: str) -> types.ModuleType | None:
    module = types.ModuleType(name)
    module.__file__ = f"<{name}>"
    try:
        exec(compile(source, module.__file__, "exec"), module.__dict__)
    except Exception:  # noqa: BLE001 - a mutant that does not import
        return None
    return module


def corpus(lesson: str, course) -> list[dict]:
    key = LESSONS[lesson]
    solution = (ROOT / "solutions" / f"{key}.py").read_text(encoding="utf-8")
    lines = solution.splitlines()
    tests = ROOT / "hidden_tests" / key
    probes = load_file(f"_probes_corpus_{lesson}", tests / "probes.py")
    ref = _module(solution, f"ref{lesson}")
    tols = course.tolerances(lesson)
    tree = ast.parse(solution)
    listed = equivalents.load(tests)
    candidates = []
    for m in mutants.generate(solution).mutants:
        new = m.source.splitlines()
        if m.id in listed or len(new) != len(lines):
            continue
        changed = [i for i, (a, b) in enumerate(zip(lines, new)) if a != b]
        if len(changed) != 1:
            continue
        candidates.append((m.id, changed[0] + 1, new[changed[0]], "audit"))
    for i, (old, new, why) in enumerate(HAND.get(lesson, [])):
        at = [n for n, text in enumerate(lines) if text.strip() == old]
        if len(at) != 1:
            raise ValueError(f"lesson {lesson}: {old!r} is on {len(at)} lines, not one")
        indent = lines[at[0]][:len(lines[at[0]]) - len(lines[at[0]].lstrip())]
        candidates.append((f"hand-{i}", at[0] + 1, indent + new, why))
    out = []
    for mid, line, text, why in candidates:
        func = _function_of(tree, line)
        part = PARTS[lesson].get(func or "")
        if part is None:
            continue
        edited = lines.copy()
        edited[line - 1] = text
        module = _module("\n".join(edited) + "\n", f"corpus{lesson}_{mid}")
        differs = "" if module is None else _differs(module, ref, probes, tests, lesson, part,
                                                     tols)
        if not differs:
            continue
        out.append({"id": mid, "part": part, "line": line, "old": lines[line - 1],
                    "new": text, "why": why, **({"backward": True} if differs == "gradient"
                                                else {})})
    return out


def main() -> None:
    course = load_course(ROOT / "course.yml")
    folder = ROOT / "tests" / "fixtures" / "divergence"
    folder.mkdir(parents=True, exist_ok=True)
    for lesson in LESSONS:
        found = corpus(lesson, course)
        (folder / f"{lesson}.yml").write_text(
            "# Single-line mistakes of the solution, each with the line it edits and its\n"
            "# part: made by scripts/divergence_corpus.py (the audit's mutants that change\n"
            "# the part's results on the traced input, and hand-written ones).\n"
            + yaml.safe_dump(found, sort_keys=False, allow_unicode=True, width=200),
            encoding="utf-8")
        print(f"lesson {lesson}: {len(found)} mistakes")


if __name__ == "__main__":
    main()
