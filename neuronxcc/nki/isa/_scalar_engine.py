"""nisa ScalarE instructions: ``activation`` (``func(data * scale + bias)``, optional add-reduce into ``reduce_res``)
and ``activation_reduce``."""
import numpy as np

from neuronxcc.nki import errors as _E
from neuronxcc.nki._trace import dtypes as _D
from neuronxcc.nki._trace import ops as _ops
from neuronxcc.nki._trace.elementwise import op_name as _op_name
from neuronxcc.nki._trace.engines import reduce_cmd
from neuronxcc.nki._trace.tensor import Tensor as _Tensor


def activation(op, data, *, bias=None, scale=1.0, reduce_op=None, reduce_res=None, reduce_cmd=reduce_cmd.idle,
               mask=None, dtype=None, **kwargs):
    """func(data * scale + bias) on ScalarE; with reduce_op=add also writes the free-axis sum to reduce_res."""
    _ops.tile_operand(data, "activation", "data")
    func = _op_name(op, "act")
    out = _ops.new_tile(data.shape, dtype or data.dtype, "SBUF", "act")
    attrs = {"func": func}
    dsts, srcs = [out], [data]
    if reduce_res is not None or reduce_op is not None:
        if reduce_res is None or _op_name(reduce_op, "reduce") != "add":
            raise _E.err_invalid_argument("activation reduce needs reduce_op=nl.add and a reduce_res tile")
        _ops.tile_operand(reduce_res, "activation", "reduce_res")
        attrs["reduce"] = "add"
        dsts.append(reduce_res)
    if bias is not None:
        if not isinstance(bias, _Tensor):
            attrs["bias"] = float(bias)
        else:
            _ops.tile_operand(bias, "activation", "bias")
            if bias.dtype not in (np.dtype(np.float32), np.dtype(np.float16), _D.BF16):
                raise _E.err_activation_bias_invalid_type(
                    "Bias parameter of activation must be a vector of type float32, float16, or bfloat16")
            if bias.shape[0] != data.shape[0] or any(s != 1 for s in bias.shape[1:]):
                raise _E.err_invalid_argument("bias of activation must be a (%d, 1) vector" % data.shape[0])
            attrs["bias_ap"] = True
            srcs.append(bias)
    if isinstance(scale, _Tensor):
        _ops.tile_operand(scale, "activation", "scale")
        if scale.shape[0] != data.shape[0] or any(s != 1 for s in scale.shape[1:]):
            raise _E.err_activation_scale_scalar_or_vector(
                "Scale parameter of activation must be either a scalar value or a 1D vector spanning the "
                "partition dimension")
        if scale.dtype != np.dtype(np.float32):
            raise _E.err_activation_scale_invalid_type(
                "Scale parameter of activation must be a scalar or vector of type float32")
        attrs["scale_ap"] = True
        srcs.append(scale)
    else:
        attrs["scale"] = float(scale)
    nd = len(dsts)
    links = [[(0, r), (nd, r)] for r in range(len(data.shape))]
    for k in range(1, len(dsts) + len(srcs)):
        if k != nd:
            links[0].append((k, 0))
    inst = _ops.emit("activation", "ACT", dsts, srcs, attrs, mask, links)
    return _ops.mark_producer(out, inst)


def activation_reduce(op, data, *, reduce_op, reduce_res, bias=None, scale=1.0, mask=None, dtype=None, **kwargs):
    return activation(op, data, bias=bias, scale=scale, reduce_op=reduce_op, reduce_res=reduce_res, mask=mask,
                      dtype=dtype)
