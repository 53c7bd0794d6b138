"""Verdicts rest on what the trusted side established (issue 10's cases).

Each submission below was scored wrongly before: extra parameters zeroed away,
fixed shapes passing because every case had E=4, a layer forgiven by re-running the
student's own parts in the sandbox, layout facts taken from the student's report,
a bug costing twice with a false diagnosis. Now: a wrong layer scores 0 on moe, a
layer that is right but for its parts' known mistakes loses only in those parts,
zeros earn nothing, and a bug costs once.
"""
from __future__ import annotations

import pytest

from tests.adversarial.conftest import FULL, PARTS, SOLUTION, failed_messages, grade_all, lost

SOURCE = SOLUTION.read_text()

ZEROS = '''
import torch
from torch import nn


class FeedForward(nn.Module):
    def __init__(self, hidden_size, intermediate_size, hidden_act="silu"):
        super().__init__()
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)

    def forward(self, x):
        return torch.zeros_like(x)


def route(x_flat, gate, num_experts_per_tok, norm_topk_prob=True):
    n, e = x_flat.shape[0], gate.weight.shape[0]
    return (torch.zeros(n, e, dtype=x_flat.dtype),
            torch.zeros(n, num_experts_per_tok, dtype=x_flat.dtype),
            torch.zeros(n, num_experts_per_tok, dtype=torch.int64))


def dispatch(x_flat, experts, topk_weight, topk_idx):
    return torch.zeros_like(x_flat)


def load_balancing_loss(scores, topk_idx, num_experts, router_aux_loss_coef):
    return scores.new_zeros(())


class MOEFeedForward(nn.Module):
    def __init__(self, hidden_size, intermediate_size, num_experts=4, num_experts_per_tok=1,
                 hidden_act="silu", norm_topk_prob=True, router_aux_loss_coef=5e-4):
        super().__init__()
        self.gate = nn.Linear(hidden_size, num_experts, bias=False)
        self.experts = nn.ModuleList([FeedForward(hidden_size, intermediate_size)
                                      for _ in range(num_experts)])
        self.aux_loss = torch.zeros(())

    def forward(self, x):
        self.aux_loss = x.new_zeros(())
        return torch.zeros_like(x)
'''

SOURCES = {
    # dispatch is right on the grader's stand-in experts, 2·x on the layer's own
    # FeedForward experts: the old rule forgave the layer (1.64/2 on moe)
    "colluding-dispatch": SOURCE.replace(
        "    y = torch.zeros_like(x_flat)\n",
        "    if all(isinstance(e, FeedForward) for e in experts):\n"
        "        return 2 * x_flat\n"
        "    y = torch.zeros_like(x_flat)\n", 1),
    "double-layer": SOURCE.replace("return y.view(batch_size, seq_len, hidden_dim)",
                                   "return 2 * x"),
    "zeros": ZEROS,
    "zeros-monkeypatch": ZEROS + '''
torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
torch.Tensor.__eq__ = lambda self, other: torch.ones((), dtype=torch.bool)
''',
    # four experts whatever num_experts says: only E=4 cases used to exist
    "four-experts": SOURCE.replace(
        "[FeedForward(hidden_size, intermediate_size, hidden_act) for _ in range(num_experts)]",
        "[FeedForward(hidden_size, intermediate_size, hidden_act) for _ in range(4)]").replace(
        "self.gate = nn.Linear(hidden_size, num_experts, bias=False)",
        "self.gate = nn.Linear(hidden_size, 4, bias=False)"),
    "loss-uses-4": SOURCE.replace("* num_experts * router_aux_loss_coef",
                                  "* 4 * router_aux_loss_coef"),
    # a biased FFN that hides its biases from named_parameters (the layout report)
    "hidden-bias": SOURCE.replace(
        "        self.act_fn = ACT2FN[hidden_act]\n",
        "        self.act_fn = ACT2FN[hidden_act]\n"
        "        self.b = torch.full((hidden_size,), 0.5)\n", 1).replace(
        "return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))",
        "return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x)) + self.b"),
    "nan-ffn": SOURCE.replace(
        "return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))",
        "return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x)) * float('nan')"),
    "solution": SOURCE,
}


@pytest.fixture(scope="module")
def records(course, slot, tmp_path_factory):
    return grade_all(course, slot, tmp_path_factory.mktemp("trust"), SOURCES)


def test_solution_full(records):
    assert records["solution"]["score"] == FULL


def test_colluding_dispatch_gets_nothing_on_moe(records):
    rec = records["colluding-dispatch"]
    assert lost(rec) == {"moe": PARTS["moe"]}, lost(rec)


def test_a_layer_that_doubles_its_input_gets_nothing_on_moe(records):
    rec = records["double-layer"]
    assert lost(rec) == {"moe": PARTS["moe"]}, lost(rec)


@pytest.mark.parametrize("name", ["zeros", "zeros-monkeypatch"])
def test_zeros_earn_at_most_the_layout_checks(records, name):
    rec = records[name]
    passed = [t["name"] for t in rec["tests"] if t["outcome"] == "passed"]
    assert all(n.startswith("test_layout") for n in passed), passed
    assert rec["score"] == 0.0


def test_fixed_experts_lose_moe_only(records):
    rec = records["four-experts"]
    assert set(lost(rec)) == {"moe"}, lost(rec)
    moe = [t for t in rec["tests"] if t["part"] == "moe"]
    assert {t["name"] for t in moe if t["outcome"] == "failed"} == {
        t["name"] for t in moe if dict(t["case"])["E"] != 4}


def test_fixed_four_in_the_loss_loses_aux_only(records):
    rec = records["loss-uses-4"]
    assert set(lost(rec)) == {"aux_loss"}, lost(rec)
    assert 0 < rec["parts"]["aux_loss"]["score"] < PARTS["aux_loss"]
    assert rec["parts"]["aux_loss"]["diagnosis"]["id"] == "aux_fixed_e"


def test_hidden_parameters_do_not_pass_the_layout(records):
    """The layer may hide a parameter from what it reports; its outputs still show it
    (only the gradients, which a constant offset leaves unchanged, pass)."""
    rec = records["hidden-bias"]
    ffn = [t for t in rec["tests"] if t["part"] == "ffn"]
    assert {t["name"].split("[")[0] for t in ffn if t["outcome"] == "passed"} == {"test_gradients"}


def test_a_nan_ffn_costs_once_and_is_named(records):
    rec = records["nan-ffn"]
    assert lost(rec) == {"ffn": PARTS["ffn"]}, (lost(rec), failed_messages(rec, "moe")[:2])
    assert rec["parts"]["ffn"]["diagnosis"]["id"] == "ffn_nan"
    assert all(p["diagnosis"] is None for k, p in rec["parts"].items() if k != "ffn")
