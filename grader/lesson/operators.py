"""Mutation operators: each looks at one syntax node (and its parent) and proposes
(target, replacement) pairs, the target being that node or one inside it.

Generic operators change what any Python code can get wrong; the tensor ones change
what tensor code gets wrong and a generic tool never tries: the dim a reduction runs
over, the activation, top-k's k, a reduction's kind, an accumulation's kind, a
transpose, a cast, a term of a sum, a renormalisation.
"""
from __future__ import annotations

import ast
import copy
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

Node = TypeVar("Node", bound=ast.AST)
Change = tuple[ast.AST, ast.AST]  # (target node, what replaces it)
Operator = Callable[[ast.AST, "ast.AST | None"], Iterator[Change]]

# Modules whose functions take the tensor as their first argument (torch.sum(x, 0)).
MODULES = {"torch", "F", "nn.functional", "torch.nn.functional", "np", "numpy"}
DIM_KEYWORDS = {"dim", "axis"}
# Calls that take a dim, and its position after the tensor (x.f(...) or torch.f(x, ...)).
DIM_POSITION = {name: 0 for name in (
    "sum", "mean", "softmax", "log_softmax", "argmax", "argmin", "amax", "amin", "max",
    "min", "any", "all", "cumsum", "cumprod", "prod", "logsumexp", "squeeze", "unsqueeze",
    "index_add_", "index_add", "index_copy_", "index_copy", "index_select", "gather",
    "scatter", "scatter_", "scatter_add", "scatter_add_", "std", "var", "flatten")}
DIM_POSITION.update(topk=1, cat=0, stack=0)  # torch.cat(tensors, dim): no receiver form
ARITH = {ast.Add: (ast.Sub, ast.Mult), ast.Sub: (ast.Add,), ast.Mult: (ast.Div, ast.Add),
         ast.Div: (ast.Mult,), ast.FloorDiv: (ast.Div,), ast.Mod: (ast.FloorDiv,),
         ast.Pow: (ast.Mult,), ast.MatMult: (ast.Mult,)}
COMPARE = {ast.Eq: (ast.NotEq,), ast.NotEq: (ast.Eq,), ast.Lt: (ast.LtE, ast.Gt),
           ast.LtE: (ast.Lt, ast.Gt), ast.Gt: (ast.GtE, ast.Lt), ast.GtE: (ast.Gt, ast.Lt),
           ast.Is: (ast.IsNot,), ast.IsNot: (ast.Is,), ast.In: (ast.NotIn,),
           ast.NotIn: (ast.In,)}
ACTIVATIONS = ("softmax", "sigmoid", "log_softmax")
REDUCTIONS = {"sum": "mean", "mean": "sum"}
ACCUMULATIONS = {"index_add_": "index_copy_", "index_copy_": "index_add_",
                 "index_add": "index_copy", "index_copy": "index_add",
                 "scatter_add_": "scatter_", "scatter_": "scatter_add_",
                 "scatter_add": "scatter", "scatter": "scatter_add"}
CASTS = ("float", "double", "half")
UNCASTS = {"float", "double", "half", "bfloat16"}  # no argument: x.float() -> x
RETYPES = {"to", "type_as", "type"}                 # one argument: x.to(y.dtype) -> x
TRANSPOSES = {"t", "transpose", "swapaxes"}
MATMULS = {"matmul": 2, "mm": 2, "bmm": 2, "linear": 2}
RESHAPES = {"view", "reshape", "flatten"}
DROPPABLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.If, ast.For,
             ast.While, ast.With)


def _with(node: Node, **fields) -> Node:
    """A shallow copy with some fields replaced (the original tree stays intact)."""
    new = copy.copy(node)
    for name, value in fields.items():
        setattr(new, name, value)
    return new


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def call_name(node: ast.AST) -> str:
    """`x.mean(...)`, `torch.mean(...)`, `mean(...)` -> "mean"; "" for anything else."""
    if not isinstance(node, ast.Call):
        return ""
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def module_form(node: ast.Call) -> bool:
    """torch.f(x, ...) rather than x.f(...): the tensor is the first argument."""
    return isinstance(node.func, ast.Attribute) and _dotted(node.func.value) in MODULES


def method_form(node: ast.Call) -> bool:
    return isinstance(node.func, ast.Attribute) and not module_form(node)


def number(node: ast.AST) -> int | float | None:
    """The value of a numeric literal (-1 included); None for anything else."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = number(node.operand)
        return None if inner is None else -inner
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
            and not isinstance(node.value, bool):
        return node.value
    return None


def literal(value: int | float) -> ast.expr:
    """A numeric literal as the parser builds it (negatives are a unary minus)."""
    if value < 0:
        return ast.UnaryOp(ast.USub(), ast.Constant(-value))
    return ast.Constant(value)


def _argument(node: ast.Call, keyword: set[str], position: int | None) -> ast.expr | None:
    for kw in node.keywords:
        if kw.arg in keyword:
            return kw.value
    if position is None:
        return None
    position += module_form(node)
    return node.args[position] if len(node.args) > position else None


def dim_targets(node: ast.AST | None) -> list[ast.expr]:
    """The integer dim arguments of a call (dim=/axis= or the dim's position)."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return []
    name = call_name(node)
    if name in ("cat", "stack") and not module_form(node):
        return []
    target = _argument(node, DIM_KEYWORDS, DIM_POSITION.get(name))
    return [target] if target is not None and isinstance(number(target), int) else []


def topk_target(node: ast.AST | None) -> ast.expr | None:
    """The k of a top-k call."""
    if not isinstance(node, ast.Call) or call_name(node) != "topk" \
            or not isinstance(node.func, ast.Attribute):
        return None
    return _argument(node, {"k"}, 0)


def _is_docstring(node: ast.AST) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
        and isinstance(node.value.value, str)


# ---- generic -------------------------------------------------------------------------

def arith(node: ast.AST, parent: ast.AST | None) -> Iterator[Change]:
    """a + b -> a - b, a * b -> a / b, ... (augmented assignments too)."""
    if isinstance(node, (ast.BinOp, ast.AugAssign)):
        for op in ARITH.get(type(node.op), ()):
            yield node, _with(node, op=op())


def compare(node: ast.AST, parent: ast.AST | None) -> Iterator[Change]:
    """== -> !=, < -> <= or >, in -> not in, ..."""
    if isinstance(node, ast.Compare):
        for i, old in enumerate(node.ops):
            for op in COMPARE[type(old)]:
                ops = list(node.ops)
                ops[i] = op()
                yield node, _with(node, ops=ops)


def _counted_elsewhere(node: ast.AST, parent: ast.AST | None) -> bool:
    """Literals that the dim and topk operators already mutate, or the 1 of a -1."""
    if isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.USub):
        return True
    if isinstance(parent, ast.keyword):
        return parent.arg in DIM_KEYWORDS | {"k"}
    return any(node is t for t in dim_targets(parent)) or node is topk_target(parent)


def constant(node: ast.AST, parent: ast.AST | None) -> Iterator[Change]:
    """0 -> 1, 1 -> 0 or 2, n -> n + 1 or n - 1, a float scaled by 10 either way."""
    value = number(node)
    if value is None or _counted_elsewhere(node, parent):
        return
    values: Sequence[int | float]
    if isinstance(value, float):
        values = [1.0] if value == 0 else [value * 10, value / 10]
    else:
        values = {0: [1], 1: [0, 2]}.get(value, [value + 1, value - 1])
    for new in values:
        yield node, literal(new)


def statement(node: ast.AST, parent: ast.AST | None) -> Iterator[Change]:
    """A statement or an assignment left out (replaced by `pass`)."""
    if isinstance(node, DROPPABLE) and not _is_docstring(node):
        yield node, ast.Pass()


def boolean(node: ast.AST, parent: ast.AST | None) -> Iterator[Change]:
    """True <-> False, `not` dropped or added to a condition, and <-> or."""
    if isinstance(node, ast.Constant) and isinstance(node.value, bool) and not (
            isinstance(parent, ast.keyword) and parent.arg == "keepdim"):
        yield node, ast.Constant(not node.value)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield node, node.operand
    elif isinstance(node, ast.BoolOp):
        yield node, _with(node, op=ast.Or() if isinstance(node.op, ast.And) else ast.And())
    if isinstance(node, (ast.If, ast.While, ast.IfExp)) and not (
            isinstance(node.test, ast.UnaryOp) and isinstance(node.test.op, ast.Not)):
        yield node.test, ast.UnaryOp(ast.Not(), node.test)


# ---- tensor --------------------------------------------------------------------------

def dim(node: ast.AST, parent: ast.AST | None) -> Iterator[Change]:
    """dim=-1 -> 0 or 1 (any reduction, softmax, index_add_, ...), keepdim flipped."""
    for target in dim_targets(node):
        old = number(target)
        for new in [d for d in (-1, 0, 1) if d != old][:2]:
            yield target, literal(new)
    if isinstance(node, ast.Call):
        for kw in node.keywords:
            if kw.arg == "keepdim" and isinstance(kw.value, ast.Constant):
                yield kw.value, ast.Constant(not kw.value.value)


def _renamed(node: ast.Call, name: str) -> ast.Call:
    func = node.func
    func = _with(func, attr=name) if isinstance(func, ast.Attribute) else _with(func, id=name)
    return _with(node, func=func)


def activation(node: ast.AST, parent: ast.AST | None) -> Iterator[Change]:
    """softmax <-> sigmoid <-> log_softmax (sigmoid takes no dim; the others get -1)."""
    name = call_name(node)
    if name not in ACTIVATIONS or not isinstance(node, ast.Call):
        return
    tensor = node.args[:1] if module_form(node) or not isinstance(node.func, ast.Attribute) \
        else []
    for other in ACTIVATIONS:
        if other == name:
            continue
        new = _renamed(node, other)
        if other == "sigmoid":
            new.args, new.keywords = tensor, []
        elif name == "sigmoid":
            new.args, new.keywords = tensor, [ast.keyword("dim", literal(-1))]
        yield node, new


def topk(node: ast.AST, parent: ast.AST | None) -> Iterator[Change]:
    """top-k's k -> k + 1, k - 1, 1."""
    k = topk_target(node)
    if k is None:
        return
    value = number(k)
    if isinstance(value, int):
        options = [literal(v) for v in (value + 1, value - 1, 1) if v != value]
    else:
        options = [ast.BinOp(k, ast.Add(), ast.Constant(1)),
                   ast.BinOp(k, ast.Sub(), ast.Constant(1)), ast.Constant(1)]
    for new in options:
        yield k, new


def reduction(node: ast.AST, parent: ast.AST | None) -> Iterator[Change]:
    """x.sum(...) <-> x.mean(...), torch.sum <-> torch.mean."""
    name = call_name(node)
    if name in REDUCTIONS and isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        yield node, _renamed(node, REDUCTIONS[name])


def accumulation(node: ast.AST, parent: ast.AST | None) -> Iterator[Change]:
    """index_add_ <-> index_copy_ (and scatter_add_ <-> scatter_): add or overwrite."""
    name = call_name(node)
    if name in ACCUMULATIONS and isinstance(node, ast.Call) \
            and isinstance(node.func, ast.Attribute):
        yield node, _renamed(node, ACCUMULATIONS[name])


def _dot_t(node: ast.expr) -> ast.expr:
    return ast.Attribute(node, "T", ast.Load())


def transpose(node: ast.AST, parent: ast.AST | None) -> Iterator[Change]:
    """A transpose removed (.T, .t(), .transpose(a, b)) or added (.T on a matmul's
    operand or before a reshape, where a layout mistake changes the numbers)."""
    if isinstance(node, ast.Attribute) and node.attr in ("T", "mT") \
            and isinstance(node.ctx, ast.Load):
        yield node, node.value
    if not isinstance(node, (ast.Call, ast.BinOp)):
        return
    if isinstance(node, ast.BinOp):
        if isinstance(node.op, ast.MatMult):
            yield node.left, _dot_t(node.left)
            yield node.right, _dot_t(node.right)
        return
    name, func = call_name(node), node.func
    if not isinstance(func, ast.Attribute):  # each change below is to a method or torch.f
        return
    if name in TRANSPOSES and method_form(node):
        yield node, func.value
    elif name in MATMULS:
        operands = ([] if module_form(node) else [func.value]) + node.args
        for operand in operands[:MATMULS[name]]:
            yield operand, _dot_t(operand)
    elif name in RESHAPES and method_form(node):
        yield func.value, _dot_t(func.value)


def dtype(node: ast.AST, parent: ast.AST | None) -> Iterator[Change]:
    """A cast removed (x.float(), x.to(y.dtype), x.type_as(y) -> x) or added to what a
    function returns (.float(), .double(), .half())."""
    name = call_name(node)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and method_form(node):
        arity = len(node.args) + len(node.keywords)
        if (name in UNCASTS and arity == 0) or (name in RETYPES and arity == 1):
            yield node, node.func.value
    if isinstance(node, ast.Return) and node.value is not None:
        values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
        for value in values:
            if number(value) is None and not isinstance(value, ast.Constant):
                for cast in CASTS:
                    if call_name(value) != cast:  # x.float().float() changes nothing
                        yield value, ast.Call(ast.Attribute(value, cast, ast.Load()), [], [])


def drop_term(node: ast.AST, parent: ast.AST | None) -> Iterator[Change]:
    """A term of a sum or a factor of a product left out: a + b -> a or b, a - b -> a."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult, ast.MatMult)):
        yield node, node.left
        yield node, node.right
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub):
        yield node, node.left


def renorm(node: ast.AST, parent: ast.AST | None) -> Iterator[Change]:
    """A renormalisation left out: a / b -> a, F.normalize(x) -> x."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.FloorDiv)):
        yield node, node.left
    elif call_name(node) == "normalize" and isinstance(node, ast.Call) and node.args:
        yield node, node.args[0]


OPERATORS: dict[str, Operator] = {
    "arith": arith, "compare": compare, "constant": constant, "statement": statement,
    "boolean": boolean, "dim": dim, "activation": activation, "topk": topk,
    "reduction": reduction, "accumulation": accumulation, "transpose": transpose,
    "dtype": dtype, "drop_term": drop_term, "renorm": renorm,
}
