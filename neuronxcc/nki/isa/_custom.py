"""``nisa.builtin_custom_op``: a function of the builtin GpSimd custom-op library.

The original calls into a compiled library for the GpSimd cores (``lib_file_name`` with its
``ulib_to_ucode_version`` / ``ulib_to_isa_version``). This compiler ships its own open build of the
builtin library (``libbuiltincustomop_cpu0..7``, run by birsim through ctypes and staged into the
NEFF), so a call naming one of its functions becomes BIR ``custom_op`` on POOL:

* ``sort_f32``: ``srcs=[x]`` ([P, N] float32), ``dsts=[values]`` or ``[values, indices]`` ([P, N]),
  each row sorted (descending unless ``descending=False``), indices int32/uint32 positions in the row;
* ``topk_f32``: the same with ``dsts`` of [P, k]: the k largest of each row, descending.

Any other function or library is a closed binary this compiler cannot run: refused with one line
naming the function, the library and what is available.
"""
from neuronxcc.nki import errors as E
from neuronxcc.nki._trace import ops

__all__ = ["builtin_custom_op"]

LIBRARY = "libbuiltincustomop"


def builtin_custom_op(function_name, lib_file_name, ulib_to_ucode_version, ulib_to_isa_version, srcs, dsts,
                      **kwargs):
    from neuronxcc.starfish.birpy.opcodes import CUSTOM_OP_FUNCTIONS
    lib = str(lib_file_name or "")
    base = lib.rsplit("/", 1)[-1]
    if function_name not in CUSTOM_OP_FUNCTIONS or (base and not base.startswith(LIBRARY)):
        raise E.err_invalid_argument(
            "nisa.builtin_custom_op: function %r of library %r (ucode %s, isa %s) is a closed GpSimd binary this "
            "compiler cannot run; its open builtin library %s provides %s"
            % (function_name, lib, ulib_to_ucode_version, ulib_to_isa_version, LIBRARY,
               ", ".join(CUSTOM_OP_FUNCTIONS)))
    srcs = list(srcs) if isinstance(srcs, (list, tuple)) else [srcs]
    dsts = list(dsts) if isinstance(dsts, (list, tuple)) else [dsts]
    if len(srcs) != 1 or len(dsts) not in (1, 2):
        raise E.err_invalid_argument("nisa.builtin_custom_op(%r) takes srcs=[data] and dsts=[values] or "
                                     "[values, indices]" % function_name)
    x = ops.tile_operand(srcs[0], "builtin_custom_op", "srcs[0]")
    for k, d in enumerate(dsts):
        ops.tile_operand(d, "builtin_custom_op", "dsts[%d]" % k, memories=("SBUF",))
    if x.buf.memory != "SBUF":
        x = ops.copy_to_sbuf(x)
    n = ops.size_of(x.shape[1:])
    width = ops.size_of(dsts[0].shape[1:])
    if function_name == "sort_f32" and width != n:
        raise E.err_invalid_argument("sort_f32 writes [P, %d] rows, got a destination %s" % (n, list(dsts[0].shape)))
    attrs = {"function": function_name, "library": LIBRARY, "with_indices": len(dsts) == 2,
             "descending": bool(kwargs.get("descending", True)), "k": int(width)}
    ops.emit("custom_op", "POOL", dsts, [x], attrs)
    return dsts[0] if len(dsts) == 1 else tuple(dsts)
