"""A scalar HLO computation applied elementwise to tensors, as Penguin elementwise ops.

Reducers, ``map`` computations, scatter combiners and select-and-scatter's select
are HLO computations over scalars. ``apply_computation`` converts one into the
Penguin ops that compute it on whole tensors of one shape: each parameter is
bound to a tensor value, each scalar constant becomes a splat of that shape,
elementwise instructions keep their kind, tuples / get-tuple-element / calls
are flattened away, scalar views (reshape, bitcast, broadcast to a scalar) are
identities. The result is the list of the root's leaves. This is how the
lowering handles any reducer built from elementwise ops: it lowers the reducer
itself instead of matching known shapes.

Invariants: every op added has the given shape; an instruction this cannot
express (a reducer that slices, sorts, loops, ...) is refused with
UnsupportedOperatorError naming it and its computation.
"""
import numpy as np

from neuronxcc.starfish.penguin import ir
from neuronxcc.starfish.penguin.hloinst import penguin_dtype, unsupported

# Opcodes a scalar computation may use besides the elementwise kinds.
_SCALAR_VIEWS = frozenset(["reshape", "bitcast", "broadcast", "copy", "opt-barrier", "optimization-barrier"])


def applicable(comp, _depth=0):
    """'' when ``comp`` is expressible elementwise, else the reason (the offending opcode)."""
    if comp is None:
        return "no computation"
    for inst in comp.instructions:
        op = inst.opcode
        if op in ("parameter", "constant", "tuple", "get-tuple-element", "reduce-precision") or \
                op in ir.ELEMENTWISE or op in _SCALAR_VIEWS:
            if op in ("parameter", "tuple", "get-tuple-element"):
                continue
            if inst.shape.is_tuple or inst.shape.dims:
                return "its %s %s is not a scalar" % (op, inst.name)
            if op == "bitcast" and inst.operands[0].shape.element_type != inst.shape.element_type:
                return "its bitcast %s changes the element type" % inst.name
            continue
        if op in ("call", "fusion") and _depth < 16:
            why = applicable(inst.called_computations[0], _depth + 1)
            if why:
                return why
            continue
        return "it uses %s (%s)" % (op, inst.name)
    return ""


def apply_computation(conv, g, comp, args, shape, loc, prefix=None):
    """Penguin values of ``comp``'s root leaves computed elementwise over ``args``.

    ``conv`` is the hlo2penguin Converter (for attributes and dtypes); ``args`` are
    Penguin value names, one per parameter leaf in parameter order, each of ``shape``."""
    why = applicable(comp)
    if why:
        raise unsupported(_first_inst(comp), "the computation %s cannot be applied elementwise: %s"
                          % (comp.name if comp is not None else "?", why))
    shape = tuple(shape)
    prefix = prefix or loc.get("hlo", "apply")
    it = iter(args)
    env = {}
    for p in sorted(comp.parameters, key=lambda p: p.parameter_number):
        env[id(p)] = _bind(p.shape, it)
    return _flatten(_body(conv, g, comp, env, shape, loc, prefix, penguin_dtype, unsupported))


def _bind(shape, it):
    if shape.is_tuple:
        return [_bind(s, it) for s in shape.tuple_shapes]
    return next(it)


def _body(conv, g, comp, env, shape, loc, prefix, penguin_dtype, unsupported):
    from neuronxcc.hlo import interp_attrs as A
    for inst in comp.instructions:
        op = inst.opcode
        if op == "parameter":
            continue
        ins = [env[id(o)] for o in inst.operands]
        name = "%s.%s" % (prefix, inst.name)
        if op == "tuple":
            env[id(inst)] = list(ins)
        elif op == "get-tuple-element":
            idx = A.int_attr(inst, "index")
            env[id(inst)] = ins[0][A.int_attr(inst, "tuple_index", 0) if idx is None else idx]
        elif op in _SCALAR_VIEWS:
            env[id(inst)] = ins[0]
        elif op in ("call", "fusion"):
            callee = inst.called_computations[0]
            sub = {id(p): a for p, a in zip(sorted(callee.parameters, key=lambda p: p.parameter_number), ins)}
            env[id(inst)] = _body(conv, g, callee, sub, shape, loc, name, penguin_dtype, unsupported)
        elif op == "constant":
            value = np.asarray(inst.literal).reshape(-1)[0]
            env[id(inst)] = g.add_op("constant", [], [(name, shape, penguin_dtype(inst.shape))],
                                     {"value": _scalar(value)}, loc)[0]
        elif op == "reduce-precision":
            env[id(inst)] = conv.reduce_precision_value(g, inst, ins[0], loc, name)
        else:
            attrs = conv.elementwise_attrs(inst)
            env[id(inst)] = g.add_op(op, ins, [(name, shape, penguin_dtype(inst.shape))], attrs, loc)[0]
    return env[id(comp.root)]


def _flatten(x):
    if isinstance(x, list):
        out = []
        for e in x:
            out.extend(_flatten(e))
        return out
    return [x]


def _first_inst(comp):
    return comp.root if comp is not None else None


def _scalar(x):
    x = np.asarray(x)
    if x.dtype == np.bool_:
        return bool(x)
    if x.dtype.kind in "iu":
        return int(x)
    return float(x.astype(np.float64))
