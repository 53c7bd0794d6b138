"""grader.probekit: the probes' shared helpers, importable inside the sandbox."""
import ast
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from grader import probekit
from grader.sandbox import bwrap

KIT = Path(probekit.__file__)


def test_imports_only_the_standard_library_and_torch():
    """Nothing else of the grader is bound into the sandbox."""
    tree = ast.parse(KIT.read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    tops = {name.split(".")[0] for name in names}
    assert tops <= set(sys.stdlib_module_names) | {"__future__", "torch"}, tops


def test_bound_read_only_into_the_sandbox_where_grader_is_imported_from():
    cmd = bwrap.command(KIT, 3, ["torch"])
    binds = {(cmd[i + 1], cmd[i + 2]) for i, a in enumerate(cmd) if a == "--ro-bind"}
    assert (str(KIT), str(KIT)) in binds
    assert (str(KIT.parent / "__init__.py"), str(KIT.parent / "__init__.py")) in binds


def test_plain_copies_and_names_a_wrong_type():
    t = torch.ones(2, requires_grad=True) * 2
    out = probekit.plain(t, "y")
    assert type(out) is torch.Tensor and not out.requires_grad and torch.equal(out, t.detach())
    with pytest.raises(TypeError, match="y must be a torch.Tensor, got list"):
        probekit.plain([1.0], "y")


def test_load_fills_what_the_reference_lacks_and_names_it():
    layer = probekit.build(nn.Linear, "Linear", 3, 2, bias=True)
    extra = probekit.load(layer, {"weight": torch.zeros(2, 3)}, "Linear")
    assert extra == ["bias"] and layer.bias.abs().sum() > 0
    assert torch.equal(layer.weight.detach(), torch.zeros(2, 3))
    with pytest.raises(probekit.LoadError, match="your Linear has no parameter named gate"):
        probekit.load(layer, {"gate": torch.zeros(1)}, "Linear")
    with pytest.raises(probekit.LoadError, match=r"your Linear.weight has shape \[2, 3\], the "
                       r"reference's \[3, 2\]"):
        probekit.load(layer, {"weight": torch.zeros(3, 2)}, "Linear")


def test_backward_and_gradients():
    layer = probekit.fixed_linear(torch.eye(2))
    x = torch.ones(1, 2, requires_grad=True)
    probekit.backward(layer(x), torch.ones(1, 2))
    assert torch.equal(probekit.grad(x), torch.ones(1, 2))
    assert set(probekit.grads(layer)) == {"weight"}
