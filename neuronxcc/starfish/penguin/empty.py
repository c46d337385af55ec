"""Zero-element tensors (JAX keeps them: ``x[:, :0]``, an empty batch, ``a @ b`` with K = 0).

The device has nothing to compute for a value with no elements, and a tile of zero partitions or
columns cannot be formed, so hlo2penguin settles them before any kernel sees them:

* a result with no elements is an empty constant (its consumers only need its shape);
* a non-empty result computed from empty operands has a value fixed by the op's definition:
  ``dot`` / ``convolution`` contracting over nothing give 0; ``reduce`` over nothing gives its init
  values; ``pad`` of an empty operand is all padding; ``concatenate`` drops its empty operands.

``settle(conv, g, inst, ins, loc)`` returns the converted value, or None when the instruction is not
one of these cases.
"""
import numpy as np

from neuronxcc.starfish.penguin import ir
from neuronxcc.starfish.penguin.hloinst import penguin_dtype


def _empty(shape):
    return shape.is_array and any(int(d) == 0 for d in shape.dims)


def _broadcast(g, name, x, dims, loc):
    if not dims:
        return x
    return g.add_op("broadcast", [x], [(name, dims, g.values[x].dtype)], {"dimensions": []}, loc)[0]


def settle(conv, g, inst, ins, loc):
    op = inst.opcode
    if op in ("parameter", "tuple", "get-tuple-element", "while", "conditional", "call", "fusion",
              "after-all", "add-dependency", "opt-barrier", "optimization-barrier", "custom-call"):
        return None
    shape = inst.shape
    if shape.is_array and _empty(shape):
        dims = tuple(shape.dims)
        dtype = penguin_dtype(shape)
        return g.add_op("constant", [], [(inst.name, dims, dtype)],
                        {"data": np.zeros(dims, ir.np_dtype(dtype))}, loc)[0]
    arrays = [o for o in inst.operands if o.shape.is_array]
    if not any(_empty(o.shape) for o in arrays):
        return None
    if op == "concatenate":
        keep = [x for o, x in zip(inst.operands, ins) if not _empty(o.shape)]
        if len(keep) == 1:
            return keep[0]
        dims = tuple(shape.dims)
        return g.add_op("concatenate", keep, [(inst.name, dims, penguin_dtype(shape))],
                        {"dimension": conv._attrs(g, inst)["dimension"]}, loc)[0]
    if op in ("dot", "convolution") and shape.is_array:
        dims = tuple(shape.dims)
        return g.add_op("constant", [], [(inst.name, dims, penguin_dtype(shape))], {"value": 0}, loc)[0]
    if op == "pad" and _empty(inst.operands[0].shape):
        return _broadcast(g, inst.name, ins[1], tuple(shape.dims), loc)
    if op == "reduce":
        n = len(ins) // 2
        if not all(_empty(o.shape) for o in inst.operands[:n]):
            return None
        leaves = shape.tuple_shapes if shape.element_type == "tuple" else [shape]
        outs = [_broadcast(g, "%s.%d" % (inst.name, k) if len(leaves) > 1 else inst.name, init,
                           tuple(s.dims), loc) for k, (init, s) in enumerate(zip(ins[n:], leaves))]
        return outs if shape.element_type == "tuple" else outs[0]
    return None
