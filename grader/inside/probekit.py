"""Helpers for a lesson's probes.py, kept in one place instead of copied per lesson.

Probes run twice: inside the sandbox on a student's module, and on the trusted side
on the solution and its known-mistake variants. So this module is bound read-only
into the sandbox beside its packages' `__init__.py` files (grader/sandbox/bwrap.py),
and it may import only the standard library and torch: nothing else of the grader
is there. What a probe returns crosses the boundary, so every helper here hands
back plain values (detached tensor copies, numbers, strings, lists, dicts), never
an object of the student's.
"""
from __future__ import annotations

import contextlib
import zlib
from collections.abc import Callable, Iterator
from typing import cast

import torch
from torch import nn


class ContractError(TypeError):
    """What a probe found the student's module lacks of the lesson's contract (a class
    that is not an nn.Module, a result that is not a tensor, a missing attribute): the
    message says what to change, and nothing in the student's code raised. The harness
    reports it as its own kind, not as the student's exception."""


class LoadError(ContractError):
    """The grader could not load the reference's weights into the student's module (a
    parameter missing, or of another shape): its layout is wrong. Reported as its own
    kind too, which says it was the loader."""


def plain(value: object, what: str) -> torch.Tensor:
    """A detached copy of a tensor as a plain torch.Tensor (no subclass, no graph), or
    a ContractError naming `what` so the student knows which result was wrong."""
    if not isinstance(value, torch.Tensor):
        raise ContractError(f"{what} must be a torch.Tensor, got {type(value).__name__}")
    return value.detach().as_subclass(torch.Tensor).clone()


def grad(t: torch.Tensor) -> torch.Tensor | None:
    """`t`'s gradient as a plain tensor, or None when backward never reached it."""
    return None if t.grad is None else plain(t.grad, "a gradient")


def grads(module: nn.Module) -> dict[str, torch.Tensor | None]:
    """Every parameter's gradient, by the parameter's name."""
    return {name: grad(p) for name, p in module.named_parameters()}


def build(cls: object, what: str, *args, **kwargs) -> nn.Module:
    """An instance of a student's (or the reference's) nn.Module subclass, built
    without nn.Linear's random initialisation: `load` overwrites every weight anyway,
    and initialisation is most of a small layer's cost."""
    if not isinstance(cls, type) or not issubclass(cls, nn.Module):
        raise ContractError(f"{what} must be a subclass of torch.nn.Module")
    reset = nn.Linear.reset_parameters
    # (assigning to a method is the point: restored below, whatever the build raises)
    nn.Linear.reset_parameters = lambda self: None  # type: ignore[method-assign]
    try:
        return cls(*args, **kwargs)
    finally:
        nn.Linear.reset_parameters = reset  # type: ignore[method-assign]  # (restored)


def fixed_linear(weight: torch.Tensor) -> nn.Linear:
    """A bias-free nn.Linear holding a copy of `weight` ([out, in])."""
    layer = cast(nn.Linear, build(nn.Linear, "nn.Linear", weight.shape[1], weight.shape[0],
                                  bias=False, dtype=weight.dtype))
    with torch.no_grad():
        layer.weight.copy_(weight)
    return layer


def noise(name: str, like: torch.Tensor) -> torch.Tensor:
    """Fixed non-zero values for a tensor the reference lacks, the same on both sides."""
    g = torch.Generator().manual_seed(zlib.crc32(name.encode()))
    return (torch.randn(like.shape, generator=g, dtype=torch.float64) * 0.5).to(like.dtype)


def load(module: nn.Module, state: dict[str, torch.Tensor], what: str) -> list[str]:
    """Load the reference's weights by name. A parameter or float buffer the reference
    lacks gets fixed non-zero values, so its effect shows in the outputs (a bias, an
    extra layer); their names are returned, for layout checks."""
    own = dict(module.named_parameters())
    missing = [k for k in state if k not in own]
    if missing:
        raise LoadError(f"your {what} has no parameter named {missing[0]} (the reference's "
                        f"names: {', '.join(sorted(state))})")
    extra = []
    with torch.no_grad():
        for name, p in own.items():
            if name in state:
                if tuple(p.shape) != tuple(state[name].shape):
                    raise LoadError(f"your {what}.{name} has shape {list(p.shape)}, the "
                                    f"reference's {list(state[name].shape)}")
                p.copy_(state[name])
            else:
                p.copy_(noise(name, p))
                extra.append(name)
        for name, b in module.named_buffers():
            if name not in state and b.is_floating_point():
                b.copy_(noise(name, b))
                extra.append(name)
    return extra


def backward(out: torch.Tensor, upstream: torch.Tensor) -> None:
    """Backpropagate (out · upstream).sum(), when the output has the expected shape and
    is part of a graph (a wrong shape is the checks' to report, not an error here)."""
    if out.shape == upstream.shape and out.requires_grad:
        (out * upstream).sum().backward()


# ---- stand-ins: reference behaviour the trusted side computes for the child ----------
# A stand-in is a function the child calls and the trusted side answers (docs/design.md,
# "Stand-ins"): its inputs go out on the data socket as a call frame bound to the
# request being served, and its outputs come back; its backward sends the gradients of
# its outputs, naming the forward call, and gets those of its inputs. The harness sets
# `channel` while it serves a request; the trusted side answers only during a stand-in
# round, or in every graded request of an assembly lesson (stand_ins.py's `ALWAYS`), and
# refuses (ends the request) at any other time.

channel: Callable[[dict], object] | None = None  # the harness's: `ask(frame) -> reply`, for the request being served


@contextlib.contextmanager
def answered_by(answer: Callable[[dict], object]) -> Iterator[None]:
    """Stand-ins answered in this process by `answer` while the block runs: the trusted
    side's probes on the reference, whose pieces are the very answers the child gets."""
    global channel
    before, channel = channel, answer
    try:
        yield
    finally:
        channel = before


def _ask(frame: dict) -> dict:
    if channel is None:
        raise ContractError("a stand-in was called while no request was being served")
    reply = channel(frame)
    if not isinstance(reply, dict) or not reply.get("ok"):
        error = reply.get("error") if isinstance(reply, dict) else None
        raise ContractError(f"the stand-in for {frame['stand_in']} did not answer: "
                            f"{str(error or 'no reply')[:300]}")
    return reply


class _StandIn(torch.autograd.Function):
    """Differentiable in its floating inputs: forward and backward each ask the trusted
    side once."""

    @staticmethod
    def forward(ctx, name: str, given: dict, *inputs: torch.Tensor):
        ctx.set_materialize_grads(False)
        reply = _ask({"stand_in": name, "inputs": [t.detach() for t in inputs],
                      "given": given})
        ctx.name, ctx.call = name, reply.get("call")
        outputs = tuple(plain(t, f"the stand-in for {name}'s result")
                        for t in reply.get("outputs") or ())
        ctx.mark_non_differentiable(*(t for t in outputs if not t.is_floating_point()))
        return outputs

    @staticmethod
    def backward(ctx, *grad_outputs):
        reply = _ask({"stand_in": ctx.name, "backward": ctx.call,
                      "grads": [None if g is None else g.detach() for g in grad_outputs]})
        grads = [None if g is None else plain(g, "a stand-in's gradient")
                 for g in reply.get("grads") or ()]
        return (None, None, *grads)


def stand_in(name: str, inputs: list[torch.Tensor], **given) -> tuple[torch.Tensor, ...]:
    """The trusted side's reference `name` on `inputs` (differentiable) and `given`
    (plain values and tensors it does not differentiate): its outputs, in order."""
    for t in inputs:
        if not isinstance(t, torch.Tensor):
            raise ContractError(f"the stand-in for {name} takes tensors, got {type(t).__name__}")
    return _StandIn.apply(name, given, *inputs)
