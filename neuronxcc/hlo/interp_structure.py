"""Interpreter handlers for the leaves and the structure ops: iota,
tokens, ``first_operand`` ops, copy, tuple and get-tuple-element.

Values are shared, not copied (copy returns its operand; the interpreter never
writes into a value in place); iota is computed once per instruction.
"""
import numpy as np

from neuronxcc.errors import HloVerifyError, unsupported_inst
from neuronxcc.hlo.interp_attrs import int_attr
from neuronxcc.hlo.interp_base import TOKEN, dims_of, dtype_of, handler, is_float, preparer


@handler("iota")
def h_iota(ev, inst, args):
    dims = dims_of(inst.shape)
    d = int_attr(inst, "iota_dimension", 0)
    dt = dtype_of(inst.shape)
    r = np.arange(dims[d]).astype(dt) if is_float(dt) else np.arange(dims[d], dtype=np.int64).astype(dt)
    shape = [1] * len(dims)
    shape[d] = dims[d]
    return np.broadcast_to(r.reshape(shape), dims)


@preparer("iota")
def p_iota(ev, inst):
    value = []

    def run(args):
        if not value:
            v = h_iota(ev, inst, args)
            v.flags.writeable = False
            value.append(v)
        return value[0]
    return run


@handler("token")
def h_token(ev, inst, args):
    return TOKEN


@handler("first_operand")
def h_first_operand(ev, inst, args):
    if not args:
        raise HloVerifyError("%s %s has no operands" % (inst.opcode, inst.name))
    return args[0]


@handler("custom_identity")
def h_custom_identity(ev, inst, args):
    """A partitioning annotation (ops.CUSTOM_CALL_TARGETS): its operand, when the shapes agree."""
    if len(args) != 1 or tuple(np.shape(args[0])) != tuple(dims_of(inst.shape)):
        raise unsupported_inst(inst, "custom-call %r from %s to %s: a shard shape of its own (this compiler runs the "
                                     "whole program on one NeuronCore)"
                               % (str(inst.attrs.get("custom_call_target")), [tuple(np.shape(a)) for a in args],
                                  tuple(dims_of(inst.shape))))
    return args[0]


@handler("copy")
def h_copy(ev, inst, args):
    return args[0]


@handler("tuple")
def h_tuple(ev, inst, args):
    return tuple(args)


@handler("get_tuple_element")
def h_gte(ev, inst, args):
    idx = int_attr(inst, "index")
    if idx is None:
        idx = getattr(inst, "tuple_index", None)
    t = args[0]
    if not isinstance(t, tuple) or not 0 <= idx < len(t):
        raise HloVerifyError("get-tuple-element %s: index %s out of range" % (inst.name, idx))
    return t[idx]


@preparer("get_tuple_element")
def p_gte(ev, inst):
    idx = int_attr(inst, "index")
    if idx is None:
        return None
    return lambda args: args[0][idx]


@preparer("tuple")
def p_tuple(ev, inst):
    return tuple


@preparer("copy")
def p_copy(ev, inst):
    return _first


def _first(args):
    return args[0]
