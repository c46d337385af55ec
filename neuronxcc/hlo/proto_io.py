"""HloModuleProto bytes <-> the module model, both directions.

``module_from_proto_bytes`` reads an HloModuleProto (or an HloProto whose
field 1 holds one); ``module_to_proto_bytes`` writes a proto that reads back
to an equal model and that XLA itself loads. Unknown fields are ignored.
Every failure is an HloParseError / HloVerifyError / TensorTooLargeError.
"""
import numpy as np

from neuronxcc.errors import CompilerError, HloParseError, HloVerifyError
from neuronxcc.hlo import schema
from neuronxcc.hlo.model import (DIMS_OPS, ConvDims, HloComputation, HloInstruction, HloModule, Shape, WindowDim,
                                 assign_called_attrs, check_literal_size, dtype_of, fill_attr_defaults)
from neuronxcc.hlo import sharding as sharding_mod

COLLECTIVE_OPS = frozenset(("all-reduce", "all-reduce-start", "all-gather", "all-gather-start",
                            "reduce-scatter", "all-to-all", "collective-permute", "collective-permute-start",
                            "send", "recv", "send-done", "recv-done", "collective-broadcast"))

_OP_ATTRS = {
    "iota": ("iota_dimension",), "get-tuple-element": ("index",), "slice": ("slice",),
    "dynamic-slice": ("dynamic_slice_sizes",), "pad": ("padding",), "reduce-window": ("window",),
    "select-and-scatter": ("window",),
    "convolution": ("window", "dim_labels", "feature_group_count", "batch_group_count", "operand_precision"),
    "dot": ("lhs_batch_dims", "lhs_contracting_dims", "rhs_batch_dims", "rhs_contracting_dims",
            "operand_precision"),
    "gather": ("offset_dims", "collapsed_slice_dims", "start_index_map", "operand_batching_dims",
               "start_indices_batching_dims", "index_vector_dim", "slice_sizes", "indices_are_sorted"),
    "scatter": ("update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims", "input_batching_dims",
                "scatter_indices_batching_dims", "index_vector_dim", "indices_are_sorted", "unique_indices"),
    "compare": ("direction", "type"), "sort": ("is_stable",),
    "custom-call": ("custom_call_target", "api_version", "custom_call_has_side_effect", "schedule",
                    "operand_layout_constraints", "output_to_operand_aliasing"),
    "rng": ("distribution",), "rng-bit-generator": ("algorithm",),
    "reduce-precision": ("exponent_bits", "mantissa_bits"), "fusion": ("kind",),
    "batch-norm-training": ("epsilon", "feature_index"), "batch-norm-inference": ("epsilon", "feature_index"),
    "batch-norm-grad": ("epsilon", "feature_index"), "fft": ("fft_type", "fft_length"), "topk": ("k", "largest"),
    "cholesky": ("lower",), "triangular-solve": ("left_side", "lower", "unit_diagonal", "transpose_a"),
    "rng-get-and-update-state": ("delta",), "infeed": ("infeed_config",),
    "outfeed": ("outfeed_config", "outfeed_shape"),
}
_ANY_OP_ATTRS = ("backend_config", "sharding", "to_apply", "body", "condition", "select", "scatter", "calls",
                 "branch_computations", "called_computations")
_COLLECTIVE_ATTRS = ("replica_groups", "channel_id", "use_global_device_ids", "constrain_layout",
                     "source_target_pairs", "is_host_transfer")


def allowed_attrs(opcode):
    """Attribute names an instruction of ``opcode`` may carry (those the proto form can hold)."""
    out = set(_ANY_OP_ATTRS) | set(_OP_ATTRS.get(opcode, ()))
    if opcode in DIMS_OPS:
        out.add("dimensions")
    if opcode in COLLECTIVE_OPS:
        out.update(_COLLECTIVE_ATTRS)
    return out


# element type -> (LiteralProto field, kind) where kind is "bytes" (raw little-endian) or "list"
_LITERAL_FIELDS = {
    "pred": ("preds", "list"), "s8": ("s8s", "bytes"), "u8": ("u8s", "bytes"), "s16": ("s16s", "bytes"),
    "u16": ("u16s", "bytes"), "f16": ("f16s", "bytes"), "bf16": ("bf16s", "bytes"), "s32": ("s32s", "list"),
    "s64": ("s64s", "list"), "u32": ("u32s", "list"), "u64": ("u64s", "list"), "f32": ("f32s", "list"),
    "f64": ("f64s", "list"), "c64": ("c64s", "list"), "c128": ("c128s", "list"),
    "f8e5m2": ("f8e5m2s", "bytes"), "f8e4m3fn": ("f8e4m3fns", "bytes"), "f8e4m3": ("f8e4m3s", "bytes"),
    "f8e3m4": ("f8e3m4s", "bytes"), "f8e4m3fnuz": ("f8e4m3fnuzs", "bytes"),
    "f8e5m2fnuz": ("f8e5m2fnuzs", "bytes"), "f8e4m3b11fnuz": ("f8e4m3b11fnuzs", "bytes"),
    "s4": ("s4s", "bytes"), "u4": ("u4s", "bytes"),
}


# -- shapes ---------------------------------------------------------------------

def shape_from_proto(sp, depth=0):
    if depth > 64:
        raise HloParseError("tuple shape nested too deeply")
    et = schema.PRIMITIVE_TYPE_NAMES.get(sp.element_type)
    if et is None or et == "invalid":
        raise HloParseError("shape with unknown element type %d" % sp.element_type)
    if et == "tuple":
        return Shape("tuple", tuple_shapes=[shape_from_proto(s, depth + 1) for s in sp.tuple_shapes])
    layout = tuple(sp.layout.minor_to_major) if sp.HasField("layout") else None
    if layout is not None and len(layout) != len(sp.dimensions):
        layout = None if not layout else layout  # an empty layout on an array means "default"
    return Shape(et, tuple(sp.dimensions), layout=layout, dynamic_dims=tuple(sp.is_dynamic_dimension))


def shape_to_proto(shape, sp=None):
    sp = sp if sp is not None else schema.ShapeProto()
    sp.element_type = schema.PRIMITIVE_TYPE_NUMBERS[shape.element_type]
    if shape.is_tuple:
        for s in shape.tuple_shapes:
            shape_to_proto(s, sp.tuple_shapes.add())
        return sp
    if shape.is_array:
        sp.dimensions.extend(shape.dims)
        sp.layout.minor_to_major.extend(shape.layout)
        sp.layout.SetInParent()
        if shape.dynamic_dims:
            sp.is_dynamic_dimension.extend(shape.dynamic_dims)
    return sp


# -- literals ---------------------------------------------------------------------

def literal_from_proto(lp, shape=None, depth=0):
    """numpy array (or tuple of them for a tuple literal) from a LiteralProto."""
    if depth > 64:
        raise HloParseError("tuple literal nested too deeply")
    lshape = shape_from_proto(lp.shape) if lp.HasField("shape") else shape
    if lshape is None:
        raise HloParseError("literal without a shape")
    if lshape.is_tuple:
        if len(lp.tuple_literals) != len(lshape.tuple_shapes):
            raise HloParseError("tuple literal has %d elements, its shape %d"
                                % (len(lp.tuple_literals), len(lshape.tuple_shapes)))
        return tuple(literal_from_proto(t, s, depth + 1) for t, s in zip(lp.tuple_literals, lshape.tuple_shapes))
    if not lshape.is_array:
        return None
    check_literal_size(lshape, "literal")
    dt = dtype_of(lshape.element_type)
    try:
        field, kind = _LITERAL_FIELDS[lshape.element_type]
    except KeyError:
        raise HloParseError("literals of type %s are not supported" % lshape.element_type) from None
    n = lshape.numel()
    if kind == "bytes":
        raw = getattr(lp, field)
        if len(raw) != n * dt.itemsize:
            raise HloParseError("%s literal holds %d bytes, its shape %s needs %d"
                                % (lshape.element_type, len(raw), lshape.to_text(False), n * dt.itemsize))
        flat = np.frombuffer(raw, dtype=dt.newbyteorder("<") if dt.itemsize > 1 else dt).astype(dt)
    elif lshape.element_type in _FIXED_WIDTH:
        # float data is read from the wire bytes: converting through Python floats would quiet
        # signalling NaNs (and is slower)
        number, width, real = _FIXED_WIDTH[lshape.element_type]
        raw = _packed_field_bytes(lp, number)
        count = len(raw) // width
        if count != n:
            raise HloParseError("%s literal holds %d values, its shape %s needs %d"
                                % (lshape.element_type, count, lshape.to_text(False), n))
        flat = np.frombuffer(raw, dtype=np.dtype(real).newbyteorder("<")).astype(real).view(dt) \
            if n else np.zeros(0, dt)
    else:
        vals = getattr(lp, field)
        if len(vals) != n:
            raise HloParseError("%s literal holds %d values, its shape %s needs %d"
                                % (lshape.element_type, len(vals), lshape.to_text(False), n))
        flat = np.asarray(vals, dtype=dt) if n else np.zeros(0, dt)
    # data is stored in the literal's physical (layout) order
    major_to_minor = tuple(reversed(lshape.layout))
    arr = flat.reshape([lshape.dims[d] for d in major_to_minor])
    if major_to_minor != tuple(range(lshape.rank)):
        arr = np.ascontiguousarray(arr.transpose(np.argsort(major_to_minor)))
    return arr


def literal_to_proto(value, shape, lp=None):
    lp = lp if lp is not None else schema.LiteralProto()
    if shape.is_tuple:
        shape_to_proto(shape, lp.shape)
        for v, s in zip(value, shape.tuple_shapes):
            literal_to_proto(v, s, lp.tuple_literals.add())
        return lp
    dshape = Shape(shape.element_type, shape.dims)  # literal data goes in default layout
    shape_to_proto(dshape, lp.shape)
    if not shape.is_array:
        return lp
    field, kind = _LITERAL_FIELDS[shape.element_type]
    arr = np.ascontiguousarray(np.asarray(value).astype(dtype_of(shape.element_type), copy=False))
    if kind == "bytes":
        dt = arr.dtype
        if dt.itemsize > 1 and dt.byteorder == ">":
            arr = arr.astype(dt.newbyteorder("<"))
        setattr(lp, field, arr.tobytes())
    elif shape.element_type in _FIXED_WIDTH:
        number, width, real = _FIXED_WIDTH[shape.element_type]
        raw = np.ascontiguousarray(arr).view(real).astype(np.dtype(real).newbyteorder("<")).tobytes()
        if raw:
            lp.MergeFromString(_varint((number << 3) | 2) + _varint(len(raw)) + raw)
    else:
        getattr(lp, field).extend(arr.ravel().tolist())
    return lp


# element type -> (LiteralProto field number, bytes per value, numpy type of one stored value)
_FIXED_WIDTH = {"f32": (8, 4, np.float32), "f64": (9, 8, np.float64), "c64": (12, 8, np.float32),
                "c128": (18, 16, np.float64)}


def _varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _read_varint(buf, i):
    shift = result = 0
    while True:
        if i >= len(buf) or shift > 63:
            raise HloParseError("malformed literal encoding")
        b = buf[i]
        result |= (b & 0x7F) << shift
        i += 1
        if not b & 0x80:
            return result, i
        shift += 7


def _packed_field_bytes(msg, number):
    """Raw little-endian bytes of a fixed-width repeated field, straight from the wire form."""
    buf = msg.SerializeToString()
    out, i = [], 0
    while i < len(buf):
        tag, i = _read_varint(buf, i)
        field, wt = tag >> 3, tag & 7
        if wt == 0:
            _, i = _read_varint(buf, i)
        elif wt == 1:
            if field == number:
                out.append(buf[i:i + 8])
            i += 8
        elif wt == 5:
            if field == number:
                out.append(buf[i:i + 4])
            i += 4
        elif wt == 2:
            length, i = _read_varint(buf, i)
            if field == number:
                out.append(buf[i:i + length])
            i += length
        else:
            raise HloParseError("malformed literal encoding")
    return b"".join(out)


# -- instructions ---------------------------------------------------------------

def _window_from_proto(w):
    return tuple(WindowDim(d.size, d.stride or 1, d.padding_low, d.padding_high, d.window_dilation or 1,
                           d.base_dilation or 1, bool(d.window_reversal)) for d in w.dimensions)


def _window_to_proto(window, wp):
    for d in window:
        wd = wp.dimensions.add()
        wd.size, wd.stride, wd.padding_low, wd.padding_high = d.size, d.stride, d.padding_low, d.padding_high
        wd.window_dilation, wd.base_dilation, wd.window_reversal = (d.window_dilation, d.base_dilation,
                                                                     d.window_reversal)


def _precision_from_proto(ip):
    if not ip.HasField("precision_config"):
        return ()
    names = tuple((schema.enum_name("Precision", p) or "DEFAULT").lower()
                  for p in ip.precision_config.operand_precision)
    return () if all(n == "default" for n in names) else names


def attrs_from_proto(ip, opcode):
    """Attributes dict (HLO text names) of one HloInstructionProto."""
    a = {}
    if opcode in DIMS_OPS:
        a["dimensions"] = tuple(ip.dimensions)
    if opcode == "iota":
        if len(ip.dimensions) != 1:
            raise HloParseError("iota %s needs exactly one dimension" % ip.name)
        a["iota_dimension"] = ip.dimensions[0]
    elif opcode == "get-tuple-element":
        a["index"] = ip.tuple_index
    elif opcode == "slice":
        a["slice"] = tuple((s.start, s.limit, s.stride or 1) for s in ip.slice_dimensions)
    elif opcode == "dynamic-slice":
        a["dynamic_slice_sizes"] = tuple(ip.dynamic_slice_sizes)
    elif opcode == "pad":
        a["padding"] = tuple((d.edge_padding_low, d.edge_padding_high, d.interior_padding)
                             for d in ip.padding_config.dimensions)
    elif opcode in ("reduce-window", "select-and-scatter"):
        a["window"] = _window_from_proto(ip.window)
    elif opcode == "convolution":
        a["window"] = _window_from_proto(ip.window)
        c = ip.convolution_dimension_numbers
        a["dim_labels"] = ConvDims(c.input_batch_dimension, c.input_feature_dimension,
                                   tuple(c.input_spatial_dimensions), c.kernel_input_feature_dimension,
                                   c.kernel_output_feature_dimension, tuple(c.kernel_spatial_dimensions),
                                   c.output_batch_dimension, c.output_feature_dimension,
                                   tuple(c.output_spatial_dimensions))
        a["feature_group_count"] = ip.feature_group_count or 1
        a["batch_group_count"] = ip.batch_group_count or 1
        a["operand_precision"] = _precision_from_proto(ip)
    elif opcode == "dot":
        d = ip.dot_dimension_numbers
        a["lhs_batch_dims"] = tuple(d.lhs_batch_dimensions)
        a["lhs_contracting_dims"] = tuple(d.lhs_contracting_dimensions)
        a["rhs_batch_dims"] = tuple(d.rhs_batch_dimensions)
        a["rhs_contracting_dims"] = tuple(d.rhs_contracting_dimensions)
        a["operand_precision"] = _precision_from_proto(ip)
    elif opcode == "gather":
        g = ip.gather_dimension_numbers
        a["offset_dims"] = tuple(g.offset_dims)
        a["collapsed_slice_dims"] = tuple(g.collapsed_slice_dims)
        a["start_index_map"] = tuple(g.start_index_map)
        a["operand_batching_dims"] = tuple(g.operand_batching_dims)
        a["start_indices_batching_dims"] = tuple(g.start_indices_batching_dims)
        a["index_vector_dim"] = g.index_vector_dim
        a["slice_sizes"] = tuple(ip.gather_slice_sizes)
        a["indices_are_sorted"] = bool(ip.indices_are_sorted)
    elif opcode == "scatter":
        s = ip.scatter_dimension_numbers
        a["update_window_dims"] = tuple(s.update_window_dims)
        a["inserted_window_dims"] = tuple(s.inserted_window_dims)
        a["scatter_dims_to_operand_dims"] = tuple(s.scatter_dims_to_operand_dims)
        a["input_batching_dims"] = tuple(s.input_batching_dims)
        a["scatter_indices_batching_dims"] = tuple(s.scatter_indices_batching_dims)
        a["index_vector_dim"] = s.index_vector_dim
        a["indices_are_sorted"] = bool(ip.indices_are_sorted)
        a["unique_indices"] = bool(ip.unique_indices)
    elif opcode == "compare":
        a["direction"] = ip.comparison_direction
        if ip.comparison_type:
            a["type"] = ip.comparison_type
    elif opcode == "sort":
        a["is_stable"] = bool(ip.is_stable)
    elif opcode == "custom-call":
        a["custom_call_target"] = ip.custom_call_target
        api = schema.enum_name("CustomCallApiVersion", ip.custom_call_api_version) or "API_VERSION_ORIGINAL"
        a["api_version"] = "API_VERSION_ORIGINAL" if api == "API_VERSION_UNSPECIFIED" else api
        a["custom_call_has_side_effect"] = bool(ip.custom_call_has_side_effect)
        if ip.custom_call_schedule:
            a["schedule"] = schema.enum_name("CustomCallSchedule", ip.custom_call_schedule)
        if ip.constrain_layout:
            a["operand_layout_constraints"] = tuple(shape_from_proto(s) for s in ip.operand_shapes_with_layout)
        if len(ip.output_operand_aliasing):
            a["output_to_operand_aliasing"] = tuple(
                (tuple(x.output_shape_index), x.operand_index, tuple(x.operand_shape_index))
                for x in ip.output_operand_aliasing)
    elif opcode == "rng":
        a["distribution"] = (schema.enum_name("RandomDistribution", ip.distribution) or "RNG_INVALID").lower()
    elif opcode == "rng-bit-generator":
        a["algorithm"] = (schema.enum_name("RandomAlgorithm", ip.rng_algorithm) or "RNG_DEFAULT").lower()
    elif opcode == "reduce-precision":
        a["exponent_bits"] = ip.exponent_bits
        a["mantissa_bits"] = ip.mantissa_bits
    elif opcode == "fusion":
        a["kind"] = ip.fusion_kind
    elif opcode.startswith("batch-norm"):
        a["epsilon"] = float(np.float32(ip.epsilon))
        a["feature_index"] = ip.feature_index
    elif opcode == "fft":
        a["fft_type"] = schema.enum_name("FftType", ip.fft_type) or "FFT"
        a["fft_length"] = tuple(ip.fft_length)
    elif opcode == "topk":
        a["k"] = ip.k
        a["largest"] = bool(ip.largest)
    elif opcode == "cholesky":
        a["lower"] = bool(ip.cholesky_options.lower) if ip.cholesky_options is not None else False
    elif opcode == "triangular-solve":
        o = ip.triangular_solve_options
        a["left_side"] = bool(o.left_side) if o is not None else False
        a["lower"] = bool(o.lower) if o is not None else False
        a["unit_diagonal"] = bool(o.unit_diagonal) if o is not None else False
        a["transpose_a"] = (schema.enum_name("Transpose", o.transpose_a) if o is not None else None) or "NO_TRANSPOSE"
    elif opcode == "rng-get-and-update-state":
        a["delta"] = ip.delta
    elif opcode == "infeed" and ip.infeed_config:
        a["infeed_config"] = ip.infeed_config.decode("utf-8", "surrogateescape")
    elif opcode == "outfeed":
        if ip.outfeed_config:
            a["outfeed_config"] = ip.outfeed_config.decode("utf-8", "surrogateescape")
        if ip.HasField("outfeed_shape"):
            a["outfeed_shape"] = shape_from_proto(ip.outfeed_shape)
    if opcode in COLLECTIVE_OPS:
        if len(ip.replica_groups):
            a["replica_groups"] = tuple(tuple(g.replica_ids) for g in ip.replica_groups)
        elif ip.HasField("collective_device_list"):
            a["replica_groups"] = _device_list_groups(ip.collective_device_list)
        elif ip.HasField("iota_replica_group_list"):
            a["replica_groups"] = _iota_groups(ip.iota_replica_group_list)
        if not a.get("replica_groups", True):
            del a["replica_groups"]  # empty is the default
        if ip.channel_id > 0:
            a["channel_id"] = ip.channel_id
        if ip.use_global_device_ids:
            a["use_global_device_ids"] = True
        if ip.constrain_layout:
            a["constrain_layout"] = True
        if len(ip.source_target_pairs):
            a["source_target_pairs"] = tuple((p.source, p.target) for p in ip.source_target_pairs)
        if ip.is_host_transfer:
            a["is_host_transfer"] = True
    if ip.backend_config:
        a["backend_config"] = ip.backend_config.decode("utf-8", "surrogateescape")
    if ip.HasField("sharding"):
        a["sharding"] = sharding_mod.to_text(ip.sharding)
    return a


def _device_list_groups(dl):
    if len(dl.replica_groups):
        return tuple(tuple(g.replica_ids) for g in dl.replica_groups)
    return _iota_groups(dl.iota_replica_group_list)


def _iota_groups(il):
    n, k = il.num_replica_groups, il.num_devices_per_group
    dims = list(il.iota_reshape_dims) or [n * k]
    perm = list(il.iota_transpose_perm) or list(range(len(dims)))
    total = int(np.prod(dims)) if dims else 0
    if total != n * k or total > (1 << 20) or sorted(perm) != list(range(len(dims))):
        raise HloParseError("malformed iota replica group list")
    ids = np.arange(total).reshape(dims).transpose(perm).reshape(n, k)
    return tuple(tuple(int(x) for x in row) for row in ids)


def attrs_to_proto(instr, ip):
    a, op = instr.attrs, instr.opcode
    if op in DIMS_OPS and "dimensions" in a:
        ip.dimensions.extend(a["dimensions"])
    if op == "iota":
        ip.dimensions.append(a["iota_dimension"])
    elif op == "get-tuple-element":
        ip.tuple_index = a["index"]
    elif op == "slice":
        for start, limit, stride in a["slice"]:
            ip.slice_dimensions.add(start=start, limit=limit, stride=stride)
    elif op == "dynamic-slice":
        ip.dynamic_slice_sizes.extend(a["dynamic_slice_sizes"])
    elif op == "pad":
        for lo, hi, interior in a["padding"]:
            ip.padding_config.dimensions.add(edge_padding_low=lo, edge_padding_high=hi, interior_padding=interior)
        ip.padding_config.SetInParent()
    elif op in ("reduce-window", "select-and-scatter"):
        _window_to_proto(a.get("window", ()), ip.window)
    elif op == "convolution":
        _window_to_proto(a.get("window", ()), ip.window)
        c, d = ip.convolution_dimension_numbers, a["dim_labels"]
        c.input_batch_dimension, c.input_feature_dimension = d.input_batch_dimension, d.input_feature_dimension
        c.input_spatial_dimensions.extend(d.input_spatial_dimensions)
        c.kernel_input_feature_dimension = d.kernel_input_feature_dimension
        c.kernel_output_feature_dimension = d.kernel_output_feature_dimension
        c.kernel_spatial_dimensions.extend(d.kernel_spatial_dimensions)
        c.output_batch_dimension, c.output_feature_dimension = d.output_batch_dimension, d.output_feature_dimension
        c.output_spatial_dimensions.extend(d.output_spatial_dimensions)
        c.SetInParent()
        ip.feature_group_count = a.get("feature_group_count", 1)
        ip.batch_group_count = a.get("batch_group_count", 1)
    elif op == "dot":
        d = ip.dot_dimension_numbers
        d.lhs_batch_dimensions.extend(a.get("lhs_batch_dims", ()))
        d.lhs_contracting_dimensions.extend(a.get("lhs_contracting_dims", ()))
        d.rhs_batch_dimensions.extend(a.get("rhs_batch_dims", ()))
        d.rhs_contracting_dimensions.extend(a.get("rhs_contracting_dims", ()))
        d.SetInParent()
    elif op == "gather":
        g = ip.gather_dimension_numbers
        for k in ("offset_dims", "collapsed_slice_dims", "start_index_map", "operand_batching_dims",
                  "start_indices_batching_dims"):
            getattr(g, k).extend(a.get(k, ()))
        g.index_vector_dim = a["index_vector_dim"]
        ip.gather_slice_sizes.extend(a["slice_sizes"])
        ip.indices_are_sorted = bool(a.get("indices_are_sorted"))
    elif op == "scatter":
        s = ip.scatter_dimension_numbers
        for k in ("update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims",
                  "input_batching_dims", "scatter_indices_batching_dims"):
            getattr(s, k).extend(a.get(k, ()))
        s.index_vector_dim = a["index_vector_dim"]
        ip.indices_are_sorted = bool(a.get("indices_are_sorted"))
        ip.unique_indices = bool(a.get("unique_indices"))
    elif op == "compare":
        ip.comparison_direction = a["direction"]
        if a.get("type"):
            ip.comparison_type = a["type"]
    elif op == "sort":
        ip.is_stable = bool(a.get("is_stable"))
    elif op == "custom-call":
        ip.custom_call_target = a["custom_call_target"]
        ip.custom_call_api_version = schema.enum_number("CustomCallApiVersion",
                                                        a.get("api_version", "API_VERSION_ORIGINAL"))
        ip.custom_call_has_side_effect = bool(a.get("custom_call_has_side_effect"))
        if a.get("schedule"):
            ip.custom_call_schedule = schema.enum_number("CustomCallSchedule", a["schedule"])
        if "operand_layout_constraints" in a:
            ip.constrain_layout = True
            for s in a["operand_layout_constraints"]:
                shape_to_proto(s, ip.operand_shapes_with_layout.add())
        for out_idx, opnd, opnd_idx in a.get("output_to_operand_aliasing", ()):
            x = ip.output_operand_aliasing.add(operand_index=opnd)
            x.output_shape_index.extend(out_idx)
            x.operand_shape_index.extend(opnd_idx)
    elif op == "rng":
        ip.distribution = schema.enum_number("RandomDistribution", a["distribution"].upper())
    elif op == "rng-bit-generator":
        ip.rng_algorithm = schema.enum_number("RandomAlgorithm", a.get("algorithm", "rng_default").upper())
    elif op == "reduce-precision":
        ip.exponent_bits, ip.mantissa_bits = a["exponent_bits"], a["mantissa_bits"]
    elif op == "fusion":
        ip.fusion_kind = a.get("kind", "kLoop")
    elif op.startswith("batch-norm"):
        ip.epsilon, ip.feature_index = a["epsilon"], a["feature_index"]
    elif op == "fft":
        ip.fft_type = schema.enum_number("FftType", a["fft_type"])
        ip.fft_length.extend(a["fft_length"])
    elif op == "topk":
        ip.k, ip.largest = a["k"], bool(a.get("largest"))
    elif op == "cholesky":
        ip.cholesky_options.lower = bool(a.get("lower"))
    elif op == "triangular-solve":
        o = ip.triangular_solve_options
        o.left_side, o.lower = bool(a.get("left_side")), bool(a.get("lower"))
        o.unit_diagonal = bool(a.get("unit_diagonal"))
        o.transpose_a = schema.enum_number("Transpose", a.get("transpose_a", "NO_TRANSPOSE").upper())
    elif op == "rng-get-and-update-state":
        ip.delta = a["delta"]
    elif op == "infeed" and "infeed_config" in a:
        ip.infeed_config = a["infeed_config"].encode("utf-8", "surrogateescape")
    elif op == "outfeed":
        if "outfeed_config" in a:
            ip.outfeed_config = a["outfeed_config"].encode("utf-8", "surrogateescape")
        if "outfeed_shape" in a:
            shape_to_proto(a["outfeed_shape"], ip.outfeed_shape)
    if op in ("dot", "convolution") and a.get("operand_precision"):
        ip.precision_config.operand_precision.extend(schema.enum_number("Precision", p.upper())
                                                     for p in a["operand_precision"])
    if op in COLLECTIVE_OPS:
        for g in a.get("replica_groups", ()):
            ip.replica_groups.add().replica_ids.extend(g)
        ip.channel_id = a.get("channel_id", 0)
        ip.use_global_device_ids = bool(a.get("use_global_device_ids"))
        ip.constrain_layout = bool(a.get("constrain_layout"))
        for s, t in a.get("source_target_pairs", ()):
            ip.source_target_pairs.add(source=s, target=t)
        ip.is_host_transfer = bool(a.get("is_host_transfer"))
    if a.get("backend_config"):
        bc = a["backend_config"]
        ip.backend_config = bc.encode("utf-8", "surrogateescape") if isinstance(bc, str) else bytes(bc)
    if a.get("sharding"):
        sh = sharding_mod.from_text(a["sharding"])
        if sh is not None:
            ip.sharding.CopyFrom(sh)


_METADATA_FIELDS = ("op_type", "op_name", "source_file", "source_line", "source_end_line", "source_column",
                    "source_end_column", "deduplicated_name", "scheduling_name")


def _metadata_from_proto(mp, frames):
    md = {}
    for k in _METADATA_FIELDS:
        v = getattr(mp, k)
        if v:
            md[k] = v
    if mp.stack_frame_id and "source_file" not in md and frames is not None:
        loc = _resolve_frame(frames, mp.stack_frame_id)
        if loc:
            md["source_file"], md["source_line"] = loc
    return md


def _resolve_frame(idx, frame_id):
    """(file, line) of a 1-based stack frame id, or None."""
    try:
        fr = idx.stack_frames[frame_id - 1]
        loc = idx.file_locations[fr.file_location_id - 1]
        return idx.file_names[loc.file_name_id - 1], loc.line
    except IndexError:
        return None


# -- modules ---------------------------------------------------------------------

def parse_proto_message(data):
    """Bytes -> HloModuleProto (accepting an HloProto wrapper). Raises HloParseError."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise HloParseError("HLO proto input must be bytes")
    data = bytes(data)
    if not data:
        raise HloParseError("the HLO module file is empty")
    mp = schema.HloModuleProto()
    error = None
    try:
        mp.ParseFromString(data)
    except Exception as e:  # DecodeError, RuntimeError from the upb runtime, ...
        error = e
    if error is not None or not len(mp.computations):
        # an HloProto puts the module in field 1 (which is `name` in an HloModuleProto)
        wrapper = schema.HloProto()
        try:
            wrapper.ParseFromString(data)
            ok = wrapper.HasField("hlo_module") and len(wrapper.hlo_module.computations) > 0
        except Exception:
            ok = False
        if ok:
            return wrapper.hlo_module
        if error is not None:
            raise HloParseError("not a valid serialized HloModuleProto (truncated or corrupt): %s"
                                % (str(error).split("\n")[0] or type(error).__name__)) from error
        raise HloParseError("not a serialized HloModuleProto or HloProto: no computations found")
    return mp


def module_from_proto(mp):
    frames = mp.stack_frame_index if mp.HasField("stack_frame_index") else None
    comps_by_id = {}
    comps = []
    seen_names = set()
    for cp in mp.computations:
        if cp.name in seen_names:
            raise HloParseError("computation %s defined twice" % cp.name)
        seen_names.add(cp.name)
        c = HloComputation(cp.name, is_fusion=bool(cp.is_fusion_computation), execution_thread=cp.execution_thread)
        c.id = cp.id
        if cp.id in comps_by_id:
            raise HloParseError("computation id %d used twice" % cp.id)
        comps_by_id[cp.id] = c
        comps.append((cp, c))
    inames = set()
    for cp, c in comps:
        by_id = {}
        pending = []
        for ip in cp.instructions:
            name, opcode = ip.name, ip.opcode  # each field read builds a new Python object: read once
            if not opcode:
                raise HloParseError("instruction %r in %s has no opcode" % (name, cp.name))
            if not ip.HasField("shape"):
                raise HloParseError("instruction %s has no shape" % name)
            if name in inames:
                raise HloParseError("instruction name %s used twice" % name)
            inames.add(name)
            shape = shape_from_proto(ip.shape)
            try:
                operands = [by_id[o] for o in ip.operand_ids]
            except KeyError as e:
                raise HloVerifyError("instruction %s uses unknown operand id %s (operands must come first)"
                                     % (name, e.args[0])) from None
            called = []
            for cid in ip.called_computation_ids:
                if cid not in comps_by_id:
                    raise HloVerifyError("instruction %s calls unknown computation id %d" % (name, cid))
                called.append(comps_by_id[cid])
            fattrs = ip.frontend_attributes.map
            instr = HloInstruction(name, opcode, shape, operands, attrs_from_proto(ip, opcode), called,
                                   metadata=_metadata_from_proto(ip.metadata, frames) if ip.HasField("metadata")
                                   else None,
                                   frontend_attributes=dict(fattrs) if len(fattrs) else None, id=ip.id)
            if opcode == "parameter":
                instr.parameter_number = ip.parameter_number
            elif opcode == "constant":
                if not ip.HasField("literal"):
                    raise HloParseError("constant %s has no literal" % name)
                instr.literal = literal_from_proto(ip.literal, shape)
            assign_called_attrs(instr)
            fill_attr_defaults(instr)
            if instr.id in by_id:
                raise HloParseError("instruction id %d used twice in %s" % (instr.id, cp.name))
            by_id[instr.id] = instr
            if len(ip.control_predecessor_ids):
                pending.append((instr, ip))
            c.add(instr)
        for instr, ip in pending:
            try:
                instr.control_predecessors = [by_id[x] for x in ip.control_predecessor_ids]
            except KeyError:
                raise HloVerifyError("instruction %s has an unknown control predecessor" % ip.name) from None
        if not c.instructions:
            raise HloVerifyError("computation %s has no instructions" % c.name)
        c.root = by_id.get(cp.root_id, c.instructions[-1]) if cp.root_id or cp.root_id in by_id else \
            c.instructions[-1]
    entry = None
    if mp.entry_computation_id and mp.entry_computation_id in comps_by_id:
        entry = comps_by_id[mp.entry_computation_id]
    elif mp.entry_computation_name:
        entry = next((c for _, c in comps if c.name == mp.entry_computation_name), None)
        if entry is None:
            raise HloVerifyError("the entry computation %s is not in the module" % mp.entry_computation_name)
    elif mp.entry_computation_id:
        raise HloVerifyError("the entry computation id %d is not in the module" % mp.entry_computation_id)
    else:                       # neither is recorded: the last computation, as XLA prints it
        entry = comps[-1][1]
    alias = [(tuple(e.output_shape_index), e.parameter_number, tuple(e.parameter_shape_index),
              {1: "may-alias", 2: "must-alias"}.get(e.kind, "may-alias"))
             for e in mp.input_output_alias.entries]
    counts = {}
    if mp.HasField("device_assignment"):
        da = mp.device_assignment
        counts = {"replica_count": da.replica_count or None, "num_partitions": da.computation_count or None}
    return HloModule(mp.name or "module", [c for _, c in comps], entry,
                     frontend_attributes=dict(mp.frontend_attributes.map), input_output_alias=alias, **counts)


def module_from_proto_bytes(data, verify=True):
    mp = parse_proto_message(data)
    try:
        m = module_from_proto(mp)
    except CompilerError:
        raise
    except RecursionError as e:
        raise HloParseError("HLO module nested too deeply") from e
    except (ValueError, TypeError, KeyError, IndexError, OverflowError, MemoryError) as e:
        raise HloParseError("malformed HloModuleProto: %s" % (e,)) from e
    if verify:
        m.verify()
    return m


def _program_shape(comp, psp):
    for p in comp.parameters:
        shape_to_proto(p.shape, psp.parameters.add())
        psp.parameter_names.append(p.name)
    shape_to_proto(comp.root.shape, psp.result)


def module_to_proto(module):
    mp = schema.HloModuleProto(name=module.name, entry_computation_name=module.entry.name)
    # callees before callers, entry last
    order = module.computation_order()
    comp_ids = {c: k + 1 for k, c in enumerate(order)}
    next_id = 1
    for c in order:
        cp = mp.computations.add(name=c.name, id=comp_ids[c], is_fusion_computation=c.is_fusion,
                                 execution_thread=c.execution_thread)
        ids = {}
        for instr in c.instructions:
            ids[instr] = next_id
            next_id += 1
        for instr in c.instructions:
            ip = cp.instructions.add(name=instr.name, opcode=instr.opcode, id=ids[instr])
            shape_to_proto(instr.shape, ip.shape)
            try:
                ip.operand_ids.extend(ids[o] for o in instr.operands)
                ip.control_predecessor_ids.extend(ids[o] for o in instr.control_predecessors)
                ip.called_computation_ids.extend(comp_ids[x] for x in instr.called_computations)
            except KeyError as e:
                raise HloVerifyError("instruction %s refers to %s outside its module/computation"
                                     % (instr.name, getattr(e.args[0], "name", e.args[0]))) from None
            if instr.opcode == "parameter":
                ip.parameter_number = instr.parameter_number
            elif instr.opcode == "constant":
                literal_to_proto(instr.literal, instr.shape, ip.literal)
            md = instr.metadata
            for k in _METADATA_FIELDS:
                if md.get(k):
                    setattr(ip.metadata, k, md[k])
            for k, v in instr.frontend_attributes.items():
                ip.frontend_attributes.map[k] = v
            attrs_to_proto(instr, ip)
        cp.root_id = ids[c.root]
        _program_shape(c, cp.program_shape)
    mp.entry_computation_id = comp_ids[module.entry]
    _program_shape(module.entry, mp.host_program_shape)
    for k, v in module.frontend_attributes.items():
        mp.frontend_attributes.map[k] = v
    if getattr(module, "replica_count", None) or getattr(module, "num_partitions", None):
        # device ids 0..N-1 in replica-major order, as XLA's default assignment numbers them
        da = mp.device_assignment
        R, P = module.replica_count or 1, module.num_partitions or 1
        da.replica_count, da.computation_count = R, P
        for p in range(P):
            da.computation_devices.add().replica_device_ids.extend([r * P + p for r in range(R)])
    for out_idx, pnum, pidx, kind in module.input_output_alias:
        e = mp.input_output_alias.entries.add(parameter_number=pnum, kind=2 if kind == "must-alias" else 1)
        e.output_shape_index.extend(out_idx)
        e.parameter_shape_index.extend(pidx)
    return mp


def module_to_proto_bytes(module):
    # deterministic: map fields (frontend attributes) in key order, so equal modules give equal bytes
    return module_to_proto(module).SerializeToString(deterministic=True)


def clone_module(module):
    """An independent copy of ``module`` (through the proto form); weights are shared, not copied."""
    copy = module_from_proto_bytes(module_to_proto_bytes(module), verify=False)
    copy.weights = dict(module.weights)
    copy.weight_parameters = dict(module.weight_parameters)
    return copy
