"""grader.inside.probekit: the probes' shared helpers, importable inside the sandbox."""
from pathlib import Path

import pytest
import torch
from torch import nn

from grader.inside import probekit
from grader.sandbox import bwrap

KIT = Path(probekit.__file__)


def test_copied_into_the_sandbox_where_grader_is_imported_from():
    """Copied, not bound: a bind's host path would show in the child's mountinfo."""
    copies = bwrap.copies(KIT)
    for name in ("inside/probekit.py", "inside/__init__.py", "__init__.py"):
        assert copies[f"{bwrap.GRADER_ROOT}/grader/{name}"] == (KIT.parent.parent / name).read_bytes()
    fds = {path: 10 + i for i, path in enumerate(copies)}
    cmd = bwrap.command(KIT, 3, ["torch"], copy_fds=fds)
    assert cmd[cmd.index("--package-root") + 1] == bwrap.GRADER_ROOT
    data = {cmd[i + 2]: cmd[i + 1] for i, a in enumerate(cmd) if a == "--ro-bind-data"}
    assert data == {path: str(fd) for path, fd in fds.items()}
    assert not any(str(KIT.parent) in a for a in cmd)


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
