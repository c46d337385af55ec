"""The one table of HLO operations neuronxcc knows.

Every opcode the reference interpreter runs is a row here: its spelling in HLO
text, its category, and the name of the reference-interpreter handler that
defines its semantics (``neuronxcc.hlo.interpreter``). ``NOT_LOWERED`` is the
truth of what compiles: the rows the lowering to the device (hlo2penguin and
the Penguin codegen) does not handle, each with the reason the compiler gives
when it refuses one. ``neuronx-cc list-operators --framework XLA`` prints
``supported_opcodes()``, the rows minus ``NOT_LOWERED``: what compiles
(tests/penguin/test_list_operators.py compiles every one of them);
``interpreted_opcodes()`` is every row (what ``xla_infergoldens`` evaluates).

``custom-call`` is supported only for the targets in ``CUSTOM_CALL_TARGETS``.

Invariants: opcode names are spelled exactly as XLA prints them in HLO text;
every row names a handler that exists in the interpreter (tests/hlo/test_ops.py
checks it).
"""
import collections

from neuronxcc.errors import UnknownCustomCallError, location, unsupported, unsupported_inst

Op = collections.namedtuple("Op", "opcode category handler")

# Categories (what the lowering needs to know about an op).
UNARY = "elementwise-unary"
BINARY = "elementwise-binary"
TERNARY = "elementwise-ternary"
SHAPE = "data-movement"
INDEXING = "indexing"
REDUCTION = "reduction"
LINALG = "linear-algebra"
SORTING = "sorting"
CONTROL = "control-flow"
STRUCTURE = "structure"
RNG = "random"
CUSTOM = "custom-call"
COLLECTIVE = "collective"

_ROWS = [
    # --- leaves -----------------------------------------------------------
    ("parameter", STRUCTURE, "parameter"),
    ("constant", STRUCTURE, "constant"),
    ("iota", SHAPE, "iota"),
    ("partition-id", STRUCTURE, "partition_id"),
    ("replica-id", STRUCTURE, "replica_id"),
    ("after-all", STRUCTURE, "token"),
    ("add-dependency", STRUCTURE, "first_operand"),
    ("opt-barrier", STRUCTURE, "first_operand"),           # kOptimizationBarrier as HLO text spells it
    ("optimization-barrier", STRUCTURE, "first_operand"),  # the long spelling some printers use
    ("copy", SHAPE, "copy"),
    ("tuple", STRUCTURE, "tuple"),
    ("get-tuple-element", STRUCTURE, "get_tuple_element"),
    # --- collectives (interp_collective; groups as neuronxcc.collectives) ----
    ("all-reduce", COLLECTIVE, "all_reduce"),
    ("all-reduce-start", COLLECTIVE, "all_reduce"),
    ("all-reduce-done", COLLECTIVE, "first_operand"),
    ("all-gather", COLLECTIVE, "all_gather"),
    ("all-gather-start", COLLECTIVE, "all_gather_start"),
    ("all-gather-done", COLLECTIVE, "async_done"),
    ("reduce-scatter", COLLECTIVE, "reduce_scatter"),
    ("all-to-all", COLLECTIVE, "all_to_all"),
    ("collective-permute", COLLECTIVE, "collective_permute"),
    ("collective-permute-start", COLLECTIVE, "collective_permute_start"),
    ("collective-permute-done", COLLECTIVE, "async_done"),
    # --- elementwise unary --------------------------------------------------
    ("abs", UNARY, "unary"),
    ("ceil", UNARY, "unary"),
    ("floor", UNARY, "unary"),
    ("round-nearest-afz", UNARY, "unary"),
    ("round-nearest-even", UNARY, "unary"),
    ("sign", UNARY, "unary"),
    ("negate", UNARY, "unary"),
    ("not", UNARY, "unary"),
    ("exponential", UNARY, "unary"),
    ("exponential-minus-one", UNARY, "unary"),
    ("log", UNARY, "unary"),
    ("log-plus-one", UNARY, "unary"),
    ("logistic", UNARY, "unary"),
    ("sqrt", UNARY, "unary"),
    ("rsqrt", UNARY, "unary"),
    ("cbrt", UNARY, "unary"),
    ("tanh", UNARY, "unary"),
    ("sine", UNARY, "unary"),
    ("cosine", UNARY, "unary"),
    ("tan", UNARY, "unary"),
    ("acos", UNARY, "unary"),          # the inverse and hyperbolic trig opcodes MHLO's exporter prints
    ("acosh", UNARY, "unary"),
    ("asin", UNARY, "unary"),
    ("asinh", UNARY, "unary"),
    ("atanh", UNARY, "unary"),
    ("cosh", UNARY, "unary"),
    ("sinh", UNARY, "unary"),
    ("erf", UNARY, "unary"),
    ("is-finite", UNARY, "unary"),
    ("popcnt", UNARY, "unary"),
    ("count-leading-zeros", UNARY, "unary"),
    ("real", UNARY, "unary"),
    ("imag", UNARY, "unary"),
    ("convert", UNARY, "convert"),
    ("bitcast-convert", UNARY, "bitcast_convert"),
    ("reduce-precision", UNARY, "reduce_precision"),
    # --- elementwise binary -------------------------------------------------
    ("add", BINARY, "binary"),
    ("subtract", BINARY, "binary"),
    ("multiply", BINARY, "binary"),
    ("divide", BINARY, "binary"),
    ("remainder", BINARY, "binary"),
    ("power", BINARY, "binary"),
    ("maximum", BINARY, "binary"),
    ("minimum", BINARY, "binary"),
    ("and", BINARY, "binary"),
    ("or", BINARY, "binary"),
    ("xor", BINARY, "binary"),
    ("shift-left", BINARY, "binary"),
    ("shift-right-logical", BINARY, "binary"),
    ("shift-right-arithmetic", BINARY, "binary"),
    ("atan2", BINARY, "binary"),
    ("compare", BINARY, "compare"),
    # --- elementwise ternary ------------------------------------------------
    ("select", TERNARY, "select"),
    ("clamp", TERNARY, "clamp"),
    ("map", TERNARY, "map"),
    # --- data movement ------------------------------------------------------
    ("broadcast", SHAPE, "broadcast"),
    ("reshape", SHAPE, "reshape"),
    ("bitcast", SHAPE, "reshape"),
    ("transpose", SHAPE, "transpose"),
    ("slice", SHAPE, "slice"),
    ("concatenate", SHAPE, "concatenate"),
    ("pad", SHAPE, "pad"),
    ("reverse", SHAPE, "reverse"),
    # --- indexing -----------------------------------------------------------
    ("dynamic-slice", INDEXING, "dynamic_slice"),
    ("dynamic-update-slice", INDEXING, "dynamic_update_slice"),
    ("gather", INDEXING, "gather"),
    ("scatter", INDEXING, "scatter"),
    # --- reductions ---------------------------------------------------------
    ("reduce", REDUCTION, "reduce"),
    ("reduce-window", REDUCTION, "reduce_window"),
    ("select-and-scatter", REDUCTION, "select_and_scatter"),
    ("batch-norm-training", REDUCTION, "batch_norm_training"),
    ("batch-norm-inference", REDUCTION, "batch_norm_inference"),
    ("batch-norm-grad", REDUCTION, "batch_norm_grad"),
    # --- linear algebra -----------------------------------------------------
    ("dot", LINALG, "dot"),
    ("convolution", LINALG, "convolution"),
    ("fft", LINALG, "fft"),
    ("cholesky", LINALG, "cholesky"),                  # what JAX emits for linalg off CPU/GPU
    ("triangular-solve", LINALG, "triangular_solve"),
    # --- sorting ------------------------------------------------------------
    ("sort", SORTING, "sort"),
    ("topk", SORTING, "topk"),
    # --- control flow -------------------------------------------------------
    ("call", CONTROL, "call"),
    ("fusion", CONTROL, "call"),           # an already-fused module: evaluate the fused computation
    ("while", CONTROL, "while_loop"),
    ("conditional", CONTROL, "conditional"),
    # --- random -------------------------------------------------------------
    ("rng-bit-generator", RNG, "rng_bit_generator"),   # algorithms in RNG_ALGORITHMS
    # --- custom calls (targets below) ---------------------------------------
    ("custom-call", CUSTOM, "custom_call"),
]

OPS = collections.OrderedDict((r[0], Op(*r)) for r in _ROWS)

# custom_call_target -> interpreter handler name.
CUSTOM_CALL_TARGETS = collections.OrderedDict([
    ("TopK", "custom_topk"),
    ("AwsNeuronTopK", "custom_topk"),
    # an NKI kernel traced by neuronxcc.nki (backend_config: the kernel's BIR; see hlo/nki_call.py)
    ("AwsNeuronCustomNativeKernel", "custom_nki_kernel"),
    ("AwsNeuronNkiKernel", "custom_nki_kernel"),
    # partitioning annotations (jax.lax.with_sharding_constraint, torch-xla's mark_sharding, shard_map's
    # shape changes): one NeuronCore runs the whole program, so each is its operand when the shapes
    # agree (one shard); a shard shape of its own is refused
    ("Sharding", "custom_identity"),
    ("SPMDFullToShardShape", "custom_identity"),
    ("SPMDShardToFullShape", "custom_identity"),
])


# rng-bit-generator algorithms supported (XLA:CPU's rng_default is Philox).
RNG_ALGORITHMS = ("rng_default", "rng_philox", "rng_three_fry")


# Rows of the table the lowering does not handle, with the reason the refusal names.
# Removing a row here is the claim that the op compiles: tests/penguin/test_list_operators.py holds it to that.
NOT_LOWERED = collections.OrderedDict([
    ("real", "complex numbers have no on-chip dtype"),
    ("imag", "complex numbers have no on-chip dtype"),
    ("fft", "no FFT kernel"),
])


def supported_opcodes():
    """Every HLO opcode that compiles, sorted; what ``list-operators`` prints."""
    return sorted(op for op in OPS if op not in NOT_LOWERED)


def interpreted_opcodes():
    """Every opcode of the table (the reference interpreter runs them all), sorted."""
    return sorted(OPS)


def is_implemented(opcode, custom_call_target=None):
    """True when the reference interpreter (and so the compiler) accepts ``opcode``."""
    if opcode == "custom-call":
        return custom_call_target is None or custom_call_target in CUSTOM_CALL_TARGETS
    return opcode in OPS


def category(opcode):
    return OPS[opcode].category


def custom_call_target(inst):
    """The custom_call_target of a custom-call instruction (its attribute, or the parsed field), or None."""
    attrs = getattr(inst, "attrs", None) or {}
    tgt = attrs.get("custom_call_target")
    if tgt is None:
        tgt = getattr(inst, "custom_call_target", None)
    return tgt.strip('"') if isinstance(tgt, str) else tgt


def unsupported_error(inst, computation=None):
    """The ``UnsupportedOperatorError`` for instruction ``inst`` (not raised)."""
    where = location(inst.name, getattr(computation, "name", None), getattr(inst, "metadata", None))
    if inst.opcode == "custom-call":
        return unsupported(custom_call_target(inst), where, hint="supported targets: %s"
                           % ", ".join(CUSTOM_CALL_TARGETS), cls=UnknownCustomCallError,
                           prefix="Unsupported custom-call target")
    return unsupported_inst(inst, computation=computation,
                            hint="run 'neuronx-cc list-operators --framework XLA' for the supported operators")


def check_supported(module):
    """Raise ``UnsupportedOperatorError`` naming the first op outside the table.

    Walks every computation reachable in ``module`` (all of ``module.computations``)
    in order; the message names the opcode, the instruction, and the user's
    ``file:line`` from the op's metadata when the HLO records it.
    """
    for comp in module_computations(module):
        for inst in comp.instructions:
            if not is_implemented(inst.opcode, custom_call_target(inst) if inst.opcode == "custom-call" else None):
                raise unsupported_error(inst, comp)
            if inst.opcode == "custom-call" and custom_call_target(inst) is None:
                raise unsupported_error(inst, comp)
            if inst.opcode == "rng-bit-generator" and \
                    (inst.attrs or {}).get("algorithm", "rng_default") not in RNG_ALGORITHMS:
                raise unsupported_inst(inst, "algorithm=%s (supported: %s)" % (inst.attrs.get("algorithm"),
                                                                              ", ".join(RNG_ALGORITHMS)), comp)


def module_computations(module):
    """Every computation of ``module`` (callees before callers), or just its entry."""
    comps = getattr(module, "computations", None)
    if isinstance(comps, dict):
        return list(comps.values())
    if comps is not None:
        return list(comps)
    return [module.entry]
