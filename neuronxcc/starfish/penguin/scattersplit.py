"""Scatters whose window is wider than the scatter kernel takes, as scatters of column chunks.

The scatter kernel holds a window in four on-chip buffers, at most ``MAX_WINDOW`` elements
(an embedding gradient's rows of a 16384-wide model are twice that). A window dimension that the
indices do not address (the whole operand dimension, every window starting at 0 in it: an
embedding row) splits the scatter into independent ones: each chunk of that dimension of the
operand gets the same chunk of every update window at the same indices, whatever the combiner,
and whether a window is out of bounds (XLA then skips all of it) depends only on the addressed
dimensions, which every chunk shares. The chunks are concatenated back.

``MAX_WINDOW`` is defined here and read by the kernel (indexing.py): this module, below the codegen,
must not import it.
"""

MAX_WINDOW = 8192           # elements of one scatter window (four on-chip buffers of it)


def split(conv, g, inst, ins, loc):
    """The Penguin value of a single-operand scatter with a too-wide window, in chunks; None when
    it fits the kernel or no window dimension can be split."""
    from neuronxcc.hlo import interp_attrs as A
    if len(inst.operands) != 3 or not inst.shape.is_array:
        return None
    d = A.scatter_dims(inst)
    oshape = tuple(inst.operands[0].shape.dims)
    ushape = tuple(inst.operands[2].shape.dims)
    uwd = list(d["update_window_dims"])
    skip = set(d["inserted_window_dims"]) | set(d.get("input_batching_dims") or [])
    wdims = [k for k in range(len(oshape)) if k not in skip]        # operand dims of the window, in order
    W = 1
    for u in uwd:
        W *= ushape[u]
    if W <= MAX_WINDOW or len(wdims) != len(uwd):
        return None
    addressed = set(d["scatter_dims_to_operand_dims"])
    for od, ud in reversed(list(zip(wdims, uwd))):
        rest = W // ushape[ud]
        if od in addressed or ushape[ud] != oshape[od] or rest > MAX_WINDOW:
            continue
        chunk = MAX_WINDOW // rest
        attrs = conv._attrs(g, inst)
        dt = g.values[ins[0]].dtype
        parts = []
        for c0 in range(0, oshape[od], chunk):
            c1 = min(oshape[od], c0 + chunk)

            def cut(v, dim, shape):
                st, lim = [0] * len(shape), list(shape)
                st[dim], lim[dim] = c0, c1
                sh = list(shape)
                sh[dim] = c1 - c0
                return g.add_op("slice", [v], [("%s.cols%d" % (inst.name, c0), tuple(sh), g.values[v].dtype)],
                                {"starts": st, "limits": lim, "strides": [1] * len(shape)}, loc)[0], tuple(sh)
            o, osh = cut(ins[0], od, oshape)
            u, _ = cut(ins[2], ud, ushape)
            parts.append(g.add_op("scatter", [o, ins[1], u], [("%s.part%d" % (inst.name, c0), osh, dt)],
                                  dict(attrs), loc)[0])
        return g.add_op("concatenate", parts, [(inst.name, oshape, dt)], {"dimension": od}, loc)[0]
    return None
