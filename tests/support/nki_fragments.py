"""Hand-written BIR kernels in the NKI tracer's serialised form (``TracedKernel.to_json()``), so the
HLO side of the NKI custom-call (decode, interpreter, splice, walrus, bir_sim) is tested on its own,
independent of the tracer; and HLO text that calls them the way JAX and torch-xla place kernels."""
import numpy as np

from neuronxcc.hlo import nki_call
from neuronxcc.starfish import birpy
from neuronxcc.starfish.birpy import AccessPattern as AP


def kernel_json(m, func_name, aliases=None, grid=()):
    def spec(n):
        t = m.tensors[n]
        return {"name": n, "shape": list(t.shape), "dtype": t.dtype}
    return {"format": "neuronxcc-nki", "version": 1, "func_name": func_name, "grid": list(grid),
            "inputs": [spec(n) for n in m.inputs], "outputs": [spec(n) for n in m.outputs],
            "aliases": dict(aliases or {}), "returns": "single" if len(m.outputs) == 1 else "tuple",
            "bir": birpy.to_json(m)}


def scale_add(rows=128, cols=64, tile=32, scale=2.0):
    """out = a * scale + b over [rows<=128, cols] f32, one column tile of TILE per loop trip
    (a loop variable, two SBUF memlocs and a scratch-free body)."""
    m = birpy.Module("scale_add", "trn1")
    m.add_tensor("a", "input", "float32", (rows, cols))
    m.add_tensor("b", "input", "float32", (rows, cols))
    m.add_tensor("out", "output", "float32", (rows, cols))
    m.add_memloc("ta", "SBUF", rows, tile * 4)
    m.add_memloc("tb", "SBUF", rows, tile * 4)
    b = birpy.Builder(m)
    with b.loop("j", 0, cols // tile) as j:
        hbm = [[cols, rows], [1, tile]]
        b.inst("dma_copy", "SP", [AP("ta", "float32", 0, [[1, tile]], 0, rows)], [AP("a", "float32", j * tile, hbm)],
               queue="q_nki0")
        b.inst("dma_copy", "SP", [AP("tb", "float32", 0, [[1, tile]], 0, rows)], [AP("b", "float32", j * tile, hbm)],
               queue="q_nki1")
        b.inst("scalar_tensor_tensor", "DVE", [AP("ta", "float32", 0, [[1, tile]], 0, rows)],
               [AP("ta", "float32", 0, [[1, tile]], 0, rows), AP("tb", "float32", 0, [[1, tile]], 0, rows)],
               op0="mult", operand0=float(scale), op1="add", name="stt")
        b.inst("dma_copy", "SP", [AP("out", "float32", j * tile, hbm)], [AP("ta", "float32", 0, [[1, tile]], 0, rows)],
               queue="q_nki0")
    b.finish()
    birpy.verify(m)
    return m


def store_half(rows=128, cols=64):
    """torch out-arg style: writes x + 1 into the LEFT half of out only; out is a mutated parameter
    (input 'out_in', output 'out', aliased), so its right half keeps the operand's values."""
    m = birpy.Module("store_half", "trn1")
    m.add_tensor("x", "input", "float32", (rows, cols))
    m.add_tensor("out_in", "input", "float32", (rows, cols))
    m.add_tensor("out", "output", "float32", (rows, cols))
    half = cols // 2
    m.add_memloc("t", "SBUF", rows, half * 4)
    b = birpy.Builder(m)
    t = AP("t", "float32", 0, [[1, half]], 0, rows)
    b.inst("dma_copy", "SP", [t], [AP("x", "float32", 0, [[cols, rows], [1, half]])], queue="q_nki0")
    b.inst("tensor_scalar", "DVE", [t], [t], op0="add", operand0=1.0)
    b.inst("dma_copy", "SP", [AP("out", "float32", 0, [[cols, rows], [1, half]])], [t], queue="q_nki0")
    b.finish()
    return m


def backend_config(m, func_name, aliases=None):
    return nki_call.encode_backend_config(kernel_json(m, func_name, aliases))


def hlo_text_two_calls(rows=128, cols=64):
    """torch-xla placement: the kernel custom-call inside a computation reached by ``call``, called twice,
    between ordinary HLO ops: root = call(call(p0*p0, p1), p0) - p1."""
    cfg = backend_config(scale_add(rows, cols), "scale_add")
    s = "f32[%d,%d]" % (rows, cols)
    return """HloModule nki_two_calls, entry_computation_layout={(%(s)s, %(s)s)->%(s)s}

kernel_wrapper {
  a = %(s)s parameter(0)
  b = %(s)s parameter(1)
  ROOT k = %(s)s custom-call(a, b), custom_call_target="AwsNeuronCustomNativeKernel", api_version=API_VERSION_UNSPECIFIED, backend_config="%(cfg)s", metadata={op_type="xla___op_NkiKernelCallImpl" op_name="xla___op_NkiKernelCallImpl"}
}

ENTRY main {
  p0 = %(s)s parameter(0)
  p1 = %(s)s parameter(1)
  sq = %(s)s multiply(p0, p0)
  c1 = %(s)s call(sq, p1), to_apply=kernel_wrapper
  c2 = %(s)s call(c1, p0), to_apply=kernel_wrapper
  ROOT r = %(s)s subtract(c2, p1)
}
""" % {"s": s, "cfg": cfg}


def two_calls_reference(p0, p1, scale=2.0):
    c1 = (p0 * p0) * scale + p1
    c2 = c1 * scale + p0
    return c2 - p1


def hlo_text_aliased(rows=128, cols=64):
    """The out-arg kernel with output_operand_aliasing, result in a tuple (get-tuple-element)."""
    cfg = backend_config(store_half(rows, cols), "store_half", aliases={"out": "out_in"})
    s = "f32[%d,%d]" % (rows, cols)
    return """HloModule nki_alias, entry_computation_layout={(%(s)s, %(s)s)->%(s)s}

ENTRY main {
  x = %(s)s parameter(0)
  o = %(s)s parameter(1)
  neg = %(s)s negate(o)
  k = (%(s)s) custom-call(x, neg), custom_call_target="AwsNeuronCustomNativeKernel", output_to_operand_aliasing={{0}: (1, {})}, backend_config="%(cfg)s"
  ROOT g = %(s)s get-tuple-element(k), index=0
}
""" % {"s": s, "cfg": cfg}


def aliased_reference(x, o):
    out = -o
    h = x.shape[1] // 2
    out[:, :h] = x[:, :h] + 1.0
    return out


def hlo_text_foreign(config):
    return """HloModule foreign, entry_computation_layout={(f32[4,4])->f32[4,4]}

ENTRY main {
  p = f32[4,4] parameter(0)
  ROOT k = f32[4,4] custom-call(p), custom_call_target="AwsNeuronCustomNativeKernel", backend_config="%s", metadata={op_name="nki_call" source_file="model.py" source_line=12}
}
""" % config


def random_inputs(seed, *shapes):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


_HLO_TYPES = {"float32": "f32", "bfloat16": "bf16", "float16": "f16", "int32": "s32", "int8": "s8", "uint8": "u8"}


def hlo_text_torch_style(tk):
    """A traced kernel placed as torch-xla places it: the entry passes its parameters to a computation reached
    by ``call`` whose root is the AwsNeuronCustomNativeKernel custom-call (op_type xla___op_NkiKernelCallImpl),
    mutated parameters declared in output_to_operand_aliasing; the entry returns the call's result(s)."""
    kj = tk.to_json()

    def ty(spec):
        return "%s[%s]" % (_HLO_TYPES[spec["dtype"]], ",".join(str(n) for n in spec["shape"]))
    ins, outs = kj["inputs"], kj["outputs"]
    in_names = [s["name"] for s in ins]
    res = ty(outs[0]) if len(outs) == 1 else "(%s)" % ", ".join(ty(s) for s in outs)
    alias = ", ".join("{%s}: (%d, {})" % ("" if len(outs) == 1 else str(k), in_names.index(kj["aliases"][s["name"]]))
                      for k, s in enumerate(outs) if s["name"] in kj["aliases"])
    params = "\n".join("  a%d = %s parameter(%d)" % (i, ty(s), i) for i, s in enumerate(ins))
    eparams = "\n".join("  p%d = %s parameter(%d)" % (i, ty(s), i) for i, s in enumerate(ins))
    return """HloModule torch_style_nki, entry_computation_layout={(%(sig)s)->%(res)s}

xla___op_NkiKernelCallImpl_wrapper {
%(params)s
  ROOT k = %(res)s custom-call(%(ops)s), custom_call_target="AwsNeuronCustomNativeKernel", api_version=API_VERSION_UNSPECIFIED%(alias)s, backend_config="%(cfg)s", metadata={op_type="xla___op_NkiKernelCallImpl" op_name="xla___op_NkiKernelCallImpl" source_file="modeling_llama.py" source_line=421}
}

ENTRY main {
%(eparams)s
  ROOT c = %(res)s call(%(eops)s), to_apply=xla___op_NkiKernelCallImpl_wrapper
}
""" % {"sig": ", ".join(ty(s) for s in ins), "res": res, "params": params, "eparams": eparams,
       "ops": ", ".join("a%d" % i for i in range(len(ins))), "eops": ", ".join("p%d" % i for i in range(len(ins))),
       "alias": (", output_to_operand_aliasing={%s}" % alias) if alias else "",
       "cfg": nki_call.encode_backend_config(kj)}
