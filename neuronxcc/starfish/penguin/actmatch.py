"""Recognise the elementwise chains frameworks emit for the ScalarE functions.

jax writes ``jax.nn.gelu`` as ~10 HLO ops (tanh form) or ~130 (the exact
form, through an erfc polynomial), ``silu`` as x * logistic(x), ``softplus``
as a logaddexp chain, ``sigmoid`` as 1 / (1 + exp(-x)) ... The activation
engine computes each of these in one instruction ([SHARED]: gelu,
gelu_apprx_tanh, silu, sigmoid, softplus, mish, ...). ``match(node)`` finds,
for a lazy elementwise ``Node``, the closest value ``v`` below it through
which every path to a non-constant leaf passes (so the node is a unary
function of ``v``), then decides which activation function it is by
evaluating the chain (float64, every op's HLO semantics) on probe points
spread over the function's domain and comparing with each function's
definition: a match needs agreement to 2e-6 relative on every probe, far
tighter than the distance between neighbouring candidates (exact gelu and
its tanh form differ by up to 4e-4). A chain that uses an op the evaluator
does not know, or matches nothing, is left to the per-op lowering.

Only chains worth it are tried: at least two ops, at most MAX_NODES, with a
transcendental or a divide among them. Results are cached per node.
"""
import math

import numpy as np

from neuronxcc.starfish.penguin.expr import Node
from neuronxcc.starfish.penguin.views import Splat

__all__ = ["ActMatcher", "CANDIDATES"]

MAX_NODES = 400
_TRIGGER = {"exponential", "exponential-minus-one", "log", "log-plus-one", "tanh", "logistic", "erf", "divide",
            "rsqrt", "sqrt", "power"}


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _sig(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def _softplus(x):
    return np.logaddexp(0.0, x)


# function name (birsim / nki.isa spelling) -> (definition in float64, domain)
CANDIDATES = {
    "gelu": (lambda x: 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0))), "all"),
    "gelu_apprx_tanh": (lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3))),
                        "all"),
    "gelu_apprx_sigmoid": (lambda x: x * _sig(1.702 * x), "all"),
    "silu": (lambda x: x * _sig(x), "all"),
    "sigmoid": (_sig, "all"),
    "softplus": (_softplus, "all"),
    "mish": (lambda x: x * np.tanh(_softplus(x)), "all"),
    "tanh": (np.tanh, "all"),
    "exp": (np.exp, "all"),
    "erf": (_erf, "all"),
    "rsqrt": (lambda x: 1.0 / np.sqrt(x), "pos"),
    "sqrt": (np.sqrt, "pos"),
    "reciprocal": (lambda x: 1.0 / x, "pos"),
    "log": (np.log, "pos"),
}

_PROBES = {
    "all": np.concatenate([np.linspace(-9.0, 9.0, 73),
                           [-1e4, -200.0, -40.0, -20.0, -0.01, 0.0, 0.003, 20.0, 40.0, 200.0, 1e4]]),
    # positive-domain functions: also probed at negatives, where the chain must fail (NaN) or agree
    # exactly as the function does (1/|x| is not reciprocal, log|x| is not log)
    "pos": np.concatenate([np.geomspace(1e-3, 1e4, 61), -np.geomspace(1e-2, 1e2, 9)]),
}


def _cmp(d, a, b):
    return {"EQ": a == b, "NE": a != b, "LT": a < b, "LE": a <= b, "GT": a > b, "GE": a >= b}[d]


_UNARY = {"negate": np.negative, "exponential": np.exp, "exponential-minus-one": np.expm1, "log": np.log,
          "log-plus-one": np.log1p, "tanh": np.tanh, "logistic": _sig, "sqrt": np.sqrt,
          "rsqrt": lambda a: 1.0 / np.sqrt(a), "abs": np.abs, "erf": _erf, "sign": np.sign,
          "copy": lambda a: a, "floor": np.floor, "ceil": np.ceil}
_BINARY = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
           "maximum": np.maximum, "minimum": np.minimum, "power": np.power}


class _Unknown(Exception):
    pass


def _eval(x, var, probe, memo):
    k = id(x)
    if k in memo:
        return memo[k]
    if x is var:
        r = probe
    elif isinstance(x, Splat):
        if isinstance(x.value, (bool, np.bool_)):
            r = np.float64(bool(x.value))
        else:
            r = np.float64(x.value)
    elif not isinstance(x, Node):
        raise _Unknown()
    else:
        a = [_eval(y, var, probe, memo) for y in x.args]
        op = x.op
        if op in _UNARY and len(a) == 1:
            r = _UNARY[op](a[0])
        elif op in _BINARY and len(a) == 2:
            r = _BINARY[op](a[0], a[1])
        elif op == "compare":
            r = _cmp(x.attrs.get("direction"), a[0], a[1]).astype(np.float64)
        elif op == "select":
            r = np.where(a[0] != 0, a[1], a[2])
        elif op == "convert":
            if x.dtype not in ("float32", "bfloat16", "float16", "float64", "bool"):
                raise _Unknown()
            r = (a[0] != 0).astype(np.float64) if x.dtype == "bool" else a[0]
        elif op == "clamp":
            r = np.minimum(np.maximum(a[1], a[0]), a[2])
        else:
            raise _Unknown()
    memo[k] = r
    return r


def _nonconst(x):
    return not isinstance(x, Splat)


class ActMatcher:
    """Per-codegen cache of ``match``."""

    def __init__(self):
        self._cache = {}
        self._chain = {}

    def match(self, node):
        """(function name, variable) when NODE is one ACT function of a value below it, else None."""
        hit = self._cache.get(id(node))
        if hit is not None and hit[0] is node:
            return hit[1]
        res = self._match(node)
        self._cache[id(node)] = (node, res)
        return res

    def is_unary_chain(self, node):
        """True when NODE is a function of one value below it that the probe evaluator can compute
        (a long chain that may still become one ACT function once its consumers are built)."""
        hit = self._chain.get(id(node))
        if hit is not None and hit[0] is node:
            return hit[1]
        res = False
        deepest = None
        for var, ops, trig in _dominators(node):
            deepest = var
        if deepest is not None:
            try:
                with np.errstate(all="ignore"):
                    _eval(node, deepest, _PROBES["all"][:2], {})
                res = True
            except _Unknown:
                res = False
        self._chain[id(node)] = (node, res)
        return res

    def _match(self, node):
        if not isinstance(node, Node) or node.dtype not in ("float32", "bfloat16", "float16"):
            return None
        for var, ops, trig in _dominators(node):
            if ops < 2 or not trig:
                continue
            hit = _identify(node, var)
            if hit is not None:
                return hit, var
        return None


def _identify(node, var):
    with np.errstate(all="ignore"):
        for domain, probe in _PROBES.items():
            try:
                got = _eval(node, var, probe, {})
            except _Unknown:
                return None
            got = np.broadcast_to(np.asarray(got, np.float64), probe.shape)
            for name, (fn, dom) in CANDIDATES.items():
                if dom != domain:
                    continue
                want = fn(probe)
                ok = np.isfinite(want)
                if not ok.any() or not np.array_equal(np.isfinite(got), ok) \
                        or not np.array_equal(np.isnan(got), np.isnan(want)):
                    continue
                err = np.abs(got[ok] - want[ok])
                if np.all(err <= 2e-6 * np.abs(want[ok]) + 1e-9):
                    return name
    return None


def _dominators(root):
    """Yield (v, ops, trig) for each value v below ROOT, closest first, through which every path
    from ROOT to a non-constant leaf passes (so ROOT is a unary function of v); ops counts the ops
    between them, trig whether a transcendental or a divide is among them. Nothing when the
    chain has more than MAX_NODES values."""
    order = {}
    stack = [(root, False)]
    n = 0
    while stack:                       # post-order numbering: children below parents
        x, done = stack.pop()
        if id(x) in order:
            continue
        if done:
            order[id(x)] = len(order)
            continue
        n += 1
        if n > MAX_NODES:
            return
        stack.append((x, True))
        if isinstance(x, Node):
            for a in x.args:
                if id(a) not in order and _nonconst(a):
                    stack.append((a, False))
    frontier = {id(root): root}
    ops = 0
    trig = False
    while frontier:
        k = max(frontier, key=lambda i: order[i])
        x = frontier[k]
        if len(frontier) == 1 and x is not root:
            yield x, ops, trig
        if not isinstance(x, Node):
            return                     # a leaf: nothing below it
        del frontier[k]
        ops += 1
        trig = trig or x.op in _TRIGGER
        for a in x.args:
            if _nonconst(a):
                frontier[id(a)] = a
