"""The module model -> HLO text in XLA's own syntax.

The output reads back through ``text_parser`` to an equal model and parses
with XLA's HLO parser. Attributes at XLA's defaults are left out the way XLA
leaves them out; values that must round-trip exactly (floats, strings with
arbitrary bytes) are printed losslessly: floats in their shortest
round-tripping decimal form, strings C-escaped.
"""
import math

import numpy as np

from neuronxcc.common.dtypes import NAN_PAYLOAD_BITS
from neuronxcc.hlo.model import default_compare_type

def c_escape(s):
    """C-escape a str (surrogateescape'd bytes allowed) for a double-quoted HLO string."""
    b = s.encode("utf-8", "surrogateescape") if isinstance(s, str) else bytes(s)
    out = []
    for ch in b:
        if ch == 0x22:
            out.append('\\"')
        elif ch == 0x5C:
            out.append("\\\\")
        elif ch == 0x0A:
            out.append("\\n")
        elif ch == 0x09:
            out.append("\\t")
        elif ch == 0x0D:
            out.append("\\r")
        elif 0x20 <= ch < 0x7F:
            out.append(chr(ch))
        else:
            out.append("\\%03o" % ch)
    return '"%s"' % "".join(out)


def _ints(vals):
    return "{%s}" % ",".join(str(int(v)) for v in vals)


def _float_text(x, et):
    """Shortest decimal that reads back to the same value of type ``et``."""
    x = float(x)
    if math.isnan(x):
        return "-nan" if math.copysign(1.0, x) < 0 else "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if et == "f64":
        s = repr(x)
    else:  # every narrower float type is exactly an f32 value
        f = np.float32(x)
        if x == 0 or 1e-5 <= abs(x) < 1e16:
            s = np.format_float_positional(f, unique=True, trim="-")
        else:
            s = np.format_float_scientific(f, unique=True, trim="-")
    if s.endswith(".0"):
        s = s[:-2]
    return s


_SHORTEST_LIMIT = 4096  # arrays up to this size print shortest decimals, bigger ones a faster exact form


def _element_texts(arr, et):
    flat = arr.ravel()
    if et == "pred":
        return ["true" if v else "false" for v in flat.tolist()]
    if et[0] in "su":
        return [str(v) for v in flat.tolist()]
    with np.errstate(invalid="ignore"):  # NaNs of the f8/bf16 types widen with a warning
        wide = flat.astype(np.float64)
    if flat.size <= _SHORTEST_LIMIT:
        out = [_float_text(v, et) for v in wide.tolist()]
    else:
        # repr of the f64 value is exact for every narrower float type too
        out = [repr(v) for v in wide.tolist()]
        for k in np.flatnonzero(np.isnan(wide) & np.signbit(wide)).tolist():
            out[k] = "-nan"
    mbits = NAN_PAYLOAD_BITS.get(et)
    if mbits:  # NaNs other than the canonical quiet one print their payload, as XLA does
        quiet = 1 << (mbits - 1)
        bits = flat.view("u%d" % flat.dtype.itemsize)
        for k in np.flatnonzero(np.isnan(wide)).tolist():
            payload = int(bits[k]) & ((1 << mbits) - 1)
            if payload != quiet:
                out[k] = "%snan(0x%x)" % ("-" if out[k].startswith("-") else "", payload)
    return out


def _empty_literal_text(dims):
    """A zero-size array as XLA prints it: one brace level per dimension down to the
    first zero-size one (f32[2,0] is ``{ {}, {} }``)."""
    if dims[0] == 0:
        return "{}"
    inner = _empty_literal_text(dims[1:])
    return "{ %s }" % ", ".join([inner] * dims[0])


def literal_text(value, shape):
    if shape.is_tuple:
        return "(%s)" % ", ".join(literal_text(v, s) for v, s in zip(value, shape.tuple_shapes))
    et = shape.element_type
    arr = np.asarray(value)
    if arr.ndim == 0:
        return _element_texts(arr.reshape(1), et)[0]
    if 0 in arr.shape:
        return _empty_literal_text(arr.shape)
    items = _element_texts(arr, et)
    dims = list(arr.shape)
    # group the innermost dimension, then wrap outward
    inner = dims[-1]
    rows = ["{%s}" % ", ".join(items[k:k + inner]) for k in range(0, len(items), inner)]
    for d in reversed(dims[:-1]):
        rows = ["{ %s }" % ", ".join(rows[k:k + d]) for k in range(0, len(rows), d)]
    return rows[0]


def _window_text(window):
    n = len(window)
    parts = ["size=" + "x".join(str(d.size) for d in window)]
    if any(d.stride != 1 for d in window):
        parts.append("stride=" + "x".join(str(d.stride) for d in window))
    if any(d.padding_low or d.padding_high for d in window):
        parts.append("pad=" + "x".join("%d_%d" % (d.padding_low, d.padding_high) for d in window))
    if any(d.base_dilation != 1 for d in window):
        parts.append("lhs_dilate=" + "x".join(str(d.base_dilation) for d in window))
    if any(d.window_dilation != 1 for d in window):
        parts.append("rhs_dilate=" + "x".join(str(d.window_dilation) for d in window))
    if any(d.window_reversal for d in window):
        parts.append("rhs_reversal=" + "x".join(str(int(d.window_reversal)) for d in window))
    return "{%s}" % " ".join(parts) if n else "{}"


def _kv_text(d):
    return "{%s}" % ",".join("%s=%s" % (k, c_escape(v)) for k, v in d.items())


def _metadata_text(md):
    parts = []
    for k in ("op_type", "op_name", "source_file", "source_line", "source_end_line", "source_column",
              "source_end_column", "deduplicated_name", "scheduling_name"):
        if md.get(k):
            v = md[k]
            parts.append("%s=%s" % (k, v if isinstance(v, int) else c_escape(v)))
    return "{%s}" % " ".join(parts)


_DEFAULT_OMIT = {
    "feature_group_count": 1, "batch_group_count": 1, "indices_are_sorted": False, "unique_indices": False,
    "is_stable": False, "custom_call_has_side_effect": False, "api_version": "API_VERSION_ORIGINAL",
    "schedule": "SCHEDULE_NONE", "use_global_device_ids": False, "constrain_layout": False,
    "is_host_transfer": False, "largest": False,
}
_OMIT_EMPTY = frozenset(("lhs_batch_dims", "rhs_batch_dims", "operand_precision", "operand_batching_dims",
                         "start_indices_batching_dims", "input_batching_dims", "scatter_indices_batching_dims",
                         "window", "backend_config", "sharding"))


def _attr_text(instr, key, val):
    """``key=value`` text, or None to leave the attribute out."""
    if key in _DEFAULT_OMIT and val == _DEFAULT_OMIT[key]:
        return None
    if key in _OMIT_EMPTY and not val:
        return None
    if key == "type" and instr.opcode == "compare":
        if val == default_compare_type(instr):
            return None
        return "type=%s" % val
    if hasattr(val, "name") and hasattr(val, "instructions"):
        return "%s=%s" % (key, val.name)
    if key in ("branch_computations", "called_computations"):
        return "%s={%s}" % (key, ", ".join(c.name for c in val))
    if key == "slice":
        return "slice={%s}" % ", ".join("[%d:%d:%d]" % t for t in val)
    if key == "padding":
        return "padding=" + "x".join(("%d_%d_%d" % p) if p[2] else ("%d_%d" % p[:2]) for p in val)
    if key == "window":
        return "window=" + _window_text(val)
    if key == "dim_labels":
        return "dim_labels=" + val.to_text()
    if key == "operand_precision":
        return "operand_precision={%s}" % ",".join(val)
    if key == "sharding":
        return "sharding=" + val
    if key in ("replica_groups", "source_target_pairs"):
        return "%s={%s}" % (key, ",".join(_ints(g) for g in val))
    if key == "operand_layout_constraints":
        return "%s={%s}" % (key, ", ".join(s.to_text() for s in val))
    if key == "output_to_operand_aliasing":
        return "%s={%s}" % (key, ", ".join("%s: (%d, %s)" % (_ints(o), n, _ints(p)) for o, n, p in val))
    if key == "outfeed_shape":
        return "outfeed_shape=" + val.to_text()
    if key in ("custom_call_target", "backend_config", "infeed_config", "outfeed_config"):
        return "%s=%s" % (key, c_escape(val))
    if isinstance(val, bool):
        return "%s=%s" % (key, "true" if val else "false")
    if isinstance(val, (tuple, list)):
        return "%s=%s" % (key, _ints(val))
    if isinstance(val, float):
        return "%s=%s" % (key, _float_text(val, "f32"))
    return "%s=%s" % (key, val)


def instruction_text(instr, print_metadata=True):
    op = instr.opcode
    if op == "constant":
        args = literal_text(instr.literal, instr.shape)
    elif op == "parameter":
        args = str(instr.parameter_number)
    else:
        args = ", ".join(o.name for o in instr.operands)
    s = "%s%s = %s %s(%s)" % ("ROOT " if instr.is_root else "", instr.name, instr.shape.to_text(), op, args)
    parts = []
    a = dict(instr.attrs)
    if op == "conditional":
        branches = a.pop("branch_computations", [])
        if instr.operands and instr.operands[0].shape.element_type == "pred" and len(branches) == 2:
            parts.append("true_computation=%s" % branches[0].name)
            parts.append("false_computation=%s" % branches[1].name)
        else:
            parts.append("branch_computations={%s}" % ", ".join(c.name for c in branches))
    if op == "while":
        parts.append("condition=%s" % a.pop("condition").name)
        parts.append("body=%s" % a.pop("body").name)
    if op == "custom-call" and "custom_call_target" in a:
        parts.append("custom_call_target=%s" % c_escape(a.pop("custom_call_target")))
    for key, val in a.items():
        t = _attr_text(instr, key, val)
        if t is not None:
            parts.append(t)
    if instr.control_predecessors:
        parts.append("control-predecessors={%s}" % ", ".join(p.name for p in instr.control_predecessors))
    if instr.frontend_attributes:
        parts.append("frontend_attributes=" + _kv_text(instr.frontend_attributes))
    if print_metadata and instr.metadata:
        md = _metadata_text(instr.metadata)
        if md != "{}":
            parts.append("metadata=" + md)
    return s + "".join(", " + p for p in parts)


def computation_text(comp, is_entry=False, print_metadata=True):
    lines = ["%s%s {" % ("ENTRY " if is_entry else "", comp.name)]
    for instr in comp.instructions:
        lines.append("  " + instruction_text(instr, print_metadata))
    tail = "}"
    if comp.execution_thread and comp.execution_thread != "main":
        tail += ", execution_thread=%s" % c_escape(comp.execution_thread)
    lines.append(tail)
    return "\n".join(lines)


def module_text(module, print_metadata=True):
    header = "HloModule %s, entry_computation_layout={%s}" % (module.name, module.entry_computation_layout())
    if module.input_output_alias:
        header += ", input_output_alias={ %s }" % ", ".join(
            "%s: (%d, %s, %s)" % (_ints(o), p, _ints(pi), kind) for o, p, pi, kind in module.input_output_alias)
    if getattr(module, "replica_count", None):
        header += ", replica_count=%d" % module.replica_count
    if getattr(module, "num_partitions", None):
        header += ", num_partitions=%d" % module.num_partitions
    if module.frontend_attributes:
        header += ", frontend_attributes=" + _kv_text(module.frontend_attributes)
    parts = [header]
    for comp in module.computation_order():
        parts.append(computation_text(comp, comp is module.entry, print_metadata))
    return "\n\n".join(parts) + "\n"


module_to_text = module_text
