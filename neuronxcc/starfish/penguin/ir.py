"""Penguin IR: the tensor-level graph between HLO and BIR, and its JSON serde.

A ``Graph`` is one straight-line program over named tensor values:

* ``values``: name -> ``Value(name, shape, dtype)``; dtype is a numpy-style
  name (``float32``, ``bfloat16``, ``int32``, ``bool``, ...).
* ``inputs``: value names in HLO parameter order (tuples flattened).
* ``outputs``: value names in flattened result order.
* ``ops``: ``Op(kind, inputs, outputs, attrs, loc)`` in a topological order
  (every input is a graph input or produced by an earlier op).

Invariants (``Graph.verify``): every value is defined exactly once, before its
uses; every op's kind is in ``OP_KINDS``; shapes are tuples of ints >= 0.
Calls are inlined and tuples flattened by ``hlo2penguin``; nested regions
(``while`` / ``conditional``) carry their sub-graphs in ``attrs`` as Graphs.

Constants: a ``constant`` op holds either ``attrs["value"]`` (a splat scalar
of the result's shape) or ``attrs["data"]`` (a numpy array, serialised as
base64 of its raw little-endian bytes).

``loc`` carries the HLO instruction name and the user's source location
(``{"hlo": name, "op_name": ..., "source_file": ..., "source_line": ...}``)
so that every later error can name them.
"""
import base64
import json

import numpy as np

from neuronxcc.common import dtypes as _dtypes
from neuronxcc.errors import location

FORMAT = "neuronxcc-penguin"
VERSION = 1

# ---------------------------------------------------------------------------
# The one table of op kinds, by group.
UNARY = frozenset("""abs negate exponential exponential-minus-one log log-plus-one tanh logistic
sqrt rsqrt cbrt sign floor ceil round-nearest-even round-nearest-afz not cosine sine tan
is-finite erf copy popcnt count-leading-zeros real imag""".split())
BINARY = frozenset("""add subtract multiply divide maximum minimum power remainder and or xor
shift-left shift-right-logical shift-right-arithmetic atan2 compare""".split())
TERNARY = frozenset(["select", "clamp"])
CONVERT = frozenset(["convert", "bitcast-convert"])
ELEMENTWISE = UNARY | BINARY | TERNARY | CONVERT
# ops that only re-index their operand (no arithmetic): views
VIEWS = frozenset(["broadcast", "reshape", "transpose", "slice", "reverse", "bitcast"])
STRUCTURAL = frozenset(["constant", "iota", "concatenate", "pad", "dot", "reduce", "reduce-window",
                        "convolution", "dynamic-slice", "dynamic-update-slice", "gather", "scatter",
                        "while", "conditional", "sort", "topk", "cumulative", "select-and-scatter",
                        "rng-bit-generator", "custom-call",
                        "nki_kernel"])  # an NKI kernel custom-call: attrs carry its BIR (penguin/nki_splice.py)
# collectives and device ids (penguin/collectives.py)
COLLECTIVES = frozenset(["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "collective_permute", "rank_id"])
OP_KINDS = ELEMENTWISE | VIEWS | STRUCTURAL | COLLECTIVES

# Penguin dtypes: the BIR types, what the lowering accepts, and complex64 (a value the converter
# names before it refuses it)
_DTYPES = frozenset([d.name for d in _dtypes.DTYPES if d.code is not None or d.lowered] + ["complex64"])


def where(loc):
    """An op's ``loc`` dict ({'hlo', 'source_file', 'source_line'}) in the one location format."""
    loc = loc or {}
    return location(loc.get("hlo", "?"), source=loc)


def np_dtype(name):
    """numpy dtype for a Penguin dtype name (ml_dtypes for bf16/fp8)."""
    d = _dtypes.BY_NAME.get(name)
    return d.np if d is not None else np.dtype(name)


def dtype_size(name):
    return np_dtype(name).itemsize


def is_float(name):
    return name.startswith("float") or name in ("bfloat16", "tfloat32")


def is_int(name):
    return name.startswith("int") or name.startswith("uint")


def distinct_ops(ops):
    """``ops`` in first-seen order, each op once (by identity): a graph's users list names an op
    once per operand it takes."""
    seen, out = set(), []
    for op in ops:
        if id(op) not in seen:
            seen.add(id(op))
            out.append(op)
    return out


class Value:
    __slots__ = ("name", "shape", "dtype")

    def __init__(self, name, shape, dtype):
        if dtype not in _DTYPES:
            raise ValueError("unknown Penguin dtype %r" % (dtype,))
        self.name = name
        self.shape = tuple(int(d) for d in shape)
        self.dtype = dtype

    @property
    def size(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self):
        return self.size * dtype_size(self.dtype)

    def __repr__(self):
        return "%s:%s%s" % (self.name, self.dtype, list(self.shape))


class Op:
    __slots__ = ("kind", "inputs", "outputs", "attrs", "loc")

    def __init__(self, kind, inputs, outputs, attrs=None, loc=None):
        if kind not in OP_KINDS:
            raise ValueError("unknown Penguin op kind %r" % (kind,))
        self.kind = kind
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.attrs = dict(attrs or {})
        self.loc = dict(loc or {})

    @property
    def output(self):
        return self.outputs[0]

    def where(self):
        """'instruction NAME at FILE:LINE' for error messages."""
        return where(self.loc)

    def __repr__(self):
        return "%s = %s(%s)" % (",".join(self.outputs), self.kind, ",".join(self.inputs))


class Graph:
    def __init__(self, name="main"):
        self.name = name
        self.values = {}
        self.inputs = []
        self.outputs = []
        self.ops = []
        self.attrs = {}

    # -- construction -------------------------------------------------------
    def new_value(self, name, shape, dtype):
        base, n = name, 1
        while name in self.values:
            n += 1
            name = "%s#%d" % (base, n)
        v = Value(name, shape, dtype)
        self.values[name] = v
        return v

    def add_input(self, name, shape, dtype):
        v = self.new_value(name, shape, dtype)
        self.inputs.append(v.name)
        return v.name

    def add_op(self, kind, inputs, out_specs, attrs=None, loc=None):
        """Append an op; out_specs: list of (name, shape, dtype). Returns output names."""
        outs = [self.new_value(n, s, d).name for (n, s, d) in out_specs]
        self.ops.append(Op(kind, inputs, outs, attrs, loc))
        return outs

    def producers(self):
        return {o: op for op in self.ops for o in op.outputs}

    def users(self):
        u = {n: [] for n in self.values}
        for op in self.ops:
            for i in op.inputs:
                u[i].append(op)
        return u

    def verify(self):
        defined = set(self.inputs)
        for op in self.ops:
            for i in op.inputs:
                if i not in defined:
                    raise ValueError("Penguin: %s uses %s before it is defined" % (op, i))
            for o in op.outputs:
                if o in defined:
                    raise ValueError("Penguin: %s redefines %s" % (op, o))
                defined.add(o)
        for o in self.outputs:
            if o not in defined:
                raise ValueError("Penguin: output %s is never defined" % o)

    def dce(self):
        """Drop ops whose outputs nobody uses (outputs and effects kept)."""
        live = set(self.outputs)
        kept = []
        for op in reversed(self.ops):
            if any(o in live for o in op.outputs):
                kept.append(op)
                live.update(op.inputs)
                live.update(op.outputs)
        self.ops = kept[::-1]
        self.values = {k: v for k, v in self.values.items() if k in live or k in self.inputs}
        return self

    # -- serde --------------------------------------------------------------
    def to_json(self):
        return {"format": FORMAT, "version": VERSION, "name": self.name,
                "inputs": list(self.inputs), "outputs": list(self.outputs),
                "attrs": _enc(self.attrs),
                "values": {n: {"shape": list(v.shape), "dtype": v.dtype} for n, v in self.values.items()},
                "ops": [{"kind": op.kind, "inputs": op.inputs, "outputs": op.outputs,
                         "attrs": _enc(op.attrs), "loc": op.loc} for op in self.ops]}

    @classmethod
    def from_json(cls, obj):
        if obj.get("format") != FORMAT:
            raise ValueError("not a Penguin IR file (format %r)" % obj.get("format"))
        g = cls(obj.get("name", "main"))
        for n, v in obj["values"].items():
            g.values[n] = Value(n, v["shape"], v["dtype"])
        g.inputs = list(obj["inputs"])
        g.outputs = list(obj["outputs"])
        g.attrs = _dec(obj.get("attrs", {}))
        for o in obj["ops"]:
            g.ops.append(Op(o["kind"], o["inputs"], o["outputs"], _dec(o.get("attrs", {})), o.get("loc")))
        return g

    def __str__(self):
        lines = ["graph %s(%s) -> (%s)" % (self.name, ", ".join(repr(self.values[i]) for i in self.inputs),
                                           ", ".join(self.outputs))]
        for op in self.ops:
            outs = ", ".join(repr(self.values[o]) for o in op.outputs)
            attrs = {k: v for k, v in op.attrs.items() if k != "data"}
            lines.append("  %s = %s(%s) %s" % (outs, op.kind, ", ".join(op.inputs), attrs if attrs else ""))
        return "\n".join(lines)


def _enc(x):
    if isinstance(x, Graph):
        return {"__graph__": x.to_json()}
    if isinstance(x, np.ndarray):
        return {"__array__": base64.b64encode(np.ascontiguousarray(x).tobytes()).decode("ascii"),
                "dtype": _dtype_name(x.dtype), "shape": list(x.shape)}
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, dict):
        return {k: _enc(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_enc(v) for v in x]
    if isinstance(x, float) and not np.isfinite(x):
        return {"__float__": repr(x)}
    return x


def _dec(x):
    if isinstance(x, dict):
        if "__graph__" in x:
            return Graph.from_json(x["__graph__"])
        if "__array__" in x:
            raw = base64.b64decode(x["__array__"])
            return np.frombuffer(raw, dtype=np_dtype(x["dtype"])).reshape(x["shape"]).copy()
        if "__float__" in x:
            return float(x["__float__"])
        return {k: _dec(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_dec(v) for v in x]
    return x


def _dtype_name(dt):
    dt = np.dtype(dt)
    if dt == np.bool_:
        return "bool"
    return dt.name


def save(graph, path):
    text = json.dumps(graph.to_json())     # one-shot: the C encoder (json.dump is pure Python)
    with open(path, "w") as fh:
        fh.write(text)


def load(path):
    with open(path) as fh:
        return Graph.from_json(json.load(fh))
