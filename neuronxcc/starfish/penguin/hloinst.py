"""What the lowering reads off an HLO instruction: its Penguin dtype, attributes, location,
called computation and reducer kind, and the one "unsupported" error naming it.

Owns: the HLO element type -> Penguin dtype map (``HLO_TO_DTYPE``, the registry's lowered
types; ``NARROW_STORAGE`` for sub-byte integers, stored one per byte), ``penguin_dtype``,
``attr`` / ``ints``, ``loc`` (a Penguin op's ``loc`` dict) and ``unsupported`` (through
``errors.unsupported_inst``: the one message and location format), ``called`` and
``reducer_kind``. Read by hlo2penguin and by the op converters it dispatches to (apply, bits,
collectives, reductions, rng), which therefore never import hlo2penguin back.
"""
import numpy as np

from neuronxcc.common import dtypes as _dtypes
from neuronxcc.errors import unsupported as _unsupported, unsupported_inst

# HLO element type -> Penguin dtype, for the types this lowering accepts (the registry's ``lowered``)
HLO_TO_DTYPE = {d.hlo: d.name for d in _dtypes.DTYPES if d.lowered}
# Sub-byte integers are stored one per byte (the value, as ml_dtypes holds it in numpy): their Penguin
# dtype is the storage byte; every op that computes one (arithmetic, convert) wraps its result to the
# type's width (NARROW_INT: bits, signed).
NARROW_STORAGE = {"s4": "int8", "u4": "uint8", "s2": "int8", "u2": "uint8"}


def penguin_dtype(shape):
    """The Penguin dtype of an HLO shape's element type (sub-byte integers: their storage byte)."""
    et = shape.element_type
    try:
        return NARROW_STORAGE.get(et) or HLO_TO_DTYPE[et]
    except KeyError:
        raise _unsupported(et, prefix="Unsupported element type") from None


def attr(inst, *names, default=None):
    """The first of attributes ``names`` the instruction has, else ``default``."""
    for n in names:
        if n in inst.attrs:
            return inst.attrs[n]
    return default


def ints(x):
    """An int / list-of-ints attribute as a list of ints ([] for None)."""
    if x is None:
        return []
    if isinstance(x, (int, np.integer)):
        return [int(x)]
    return [int(v) for v in x]


def loc(inst):
    """The ``loc`` dict of the Penguin ops lowered from ``inst``: its name and source metadata."""
    md = getattr(inst, "metadata", None) or {}
    get = md.get if isinstance(md, dict) else (lambda k, d=None: getattr(md, k, d))
    out = {"hlo": inst.name}
    for k in ("op_name", "source_file", "source_line"):
        v = get(k, None)
        if v:
            out[k] = v
    return out


def unsupported(inst, why=None):
    """The UnsupportedOperatorError (NCC_EVRF001) for an instruction this lowering refuses, and why."""
    return unsupported_inst(inst, why)


def called(inst):
    """The (first) computation ``inst`` calls: to_apply, comparator, scatter or select; or None."""
    comps = list(getattr(inst, "called_computations", None) or [])
    if not comps:
        c = attr(inst, "to_apply", "comparator", "scatter", "select")
        comps = [c] if c is not None else []
    return comps[0] if comps else None


_REDUCERS = {"add": "add", "maximum": "max", "minimum": "min", "multiply": "mul", "and": "and",
             "or": "or", "xor": "xor"}
# the elementwise op of each ALU reducer kind (the inverse of _REDUCERS on add / max / min / mul)
REDUCER_OP = {kind: op for op, kind in _REDUCERS.items() if kind in ("add", "max", "min", "mul")}


def reducer_kind(comp):
    """'add' | 'max' | 'min' | 'mul' | 'and' | 'or' | 'argmax' | 'argmin' | 'other'.

    A float (value, index) reducer without the ``ne(a, a)`` clause (NaN wins, as jax
    writes it) is 'argmax_nonan' / 'argmin_nonan': there NaNs never win."""
    if comp is None:
        return "other"
    root = comp.root
    params = list(comp.parameters)
    if root.opcode in _REDUCERS and len(params) == 2:
        if set(id(o) for o in root.operands) == set(id(p) for p in params):
            return _REDUCERS[root.opcode]
    if root.opcode == "tuple" and len(params) == 4:
        # variadic (value, index) reducer: find the value comparison
        for i in comp.instructions:
            if i.opcode == "compare":
                ops = [o for o in i.operands]
                if (len(ops) == 2 and ops[0] is params[0] and ops[1] is params[2]) or \
                        (len(ops) == 2 and ops[0] is params[2] and ops[1] is params[0]):
                    d = str(attr(i, "direction", "comparison_direction")).upper()
                    first = ops[0] is params[0]
                    kind = None
                    if d in ("GT", "GE"):
                        kind = "argmax" if first else "argmin"
                    if d in ("LT", "LE"):
                        kind = "argmin" if first else "argmax"
                    if kind is not None:
                        return kind if nan_clause(comp, params) else kind + "_nonan"
    return "other"


def nan_clause(comp, params):
    """True when the (value, index) reducer picks a NaN value (``ne(a, a)``), or the values
    are integers (no NaN to pick)."""
    dt = HLO_TO_DTYPE.get(params[0].shape.element_type, "")
    for i in comp.instructions:
        if i.opcode == "compare":
            ops = list(i.operands)
            if len(ops) == 2 and ops[0] is ops[1] and (ops[0] is params[0] or ops[0] is params[2]) and \
                    str(attr(i, "direction", "comparison_direction")).upper() == "NE":
                return True
    return dt.startswith(("int", "uint", "bool"))
