"""The protobuf schema of the XLA HLO subset this package reads and writes.

Built in code into a private descriptor pool (so it never collides with any
other ``xla`` package a process may load): ``_file_bytes`` writes the
serialized FileDescriptorProto itself (wire format by hand), so loading the
schema never imports ``descriptor_pb2``; with protobuf's upb backend the
message classes are made straight from its C module, skipping protobuf's
Python layer (about 25 ms of every HLO-reading tool's start-up). Field
numbers, types and enum values follow XLA's public ``hlo.proto`` and
``xla_data.proto`` (facts of the wire format); only the fields this compiler
uses are declared, everything else on the wire is kept as unknown fields and
ignored. Message classes are module attributes: ``HloModuleProto``,
``HloProto``, ``HloInstructionProto``, ``ShapeProto``, ``LiteralProto``, ...
"""
# FieldDescriptorProto's Type and Label numbers (descriptor.proto, facts of the wire format)
TYPE_DOUBLE, TYPE_FLOAT, TYPE_INT64, TYPE_UINT64, TYPE_INT32 = 1, 2, 3, 4, 5
TYPE_BOOL, TYPE_STRING, TYPE_MESSAGE, TYPE_BYTES, TYPE_UINT32, TYPE_ENUM = 8, 9, 11, 12, 13, 14
LABEL_OPTIONAL, LABEL_REPEATED = 1, 3

# scalar type name -> FieldDescriptorProto type
_SCALARS = {
    "int64": TYPE_INT64, "int32": TYPE_INT32, "uint32": TYPE_UINT32,
    "uint64": TYPE_UINT64, "bool": TYPE_BOOL, "string": TYPE_STRING,
    "bytes": TYPE_BYTES, "float": TYPE_FLOAT, "double": TYPE_DOUBLE,
}

# enum name -> [(value name, number)]
ENUMS = {
    "PrimitiveType": [
        ("PRIMITIVE_TYPE_INVALID", 0), ("PRED", 1), ("S8", 2), ("S16", 3), ("S32", 4), ("S64", 5),
        ("U8", 6), ("U16", 7), ("U32", 8), ("U64", 9), ("F16", 10), ("F32", 11), ("F64", 12),
        ("TUPLE", 13), ("OPAQUE_TYPE", 14), ("C64", 15), ("BF16", 16), ("TOKEN", 17), ("C128", 18),
        ("F8E5M2", 19), ("F8E4M3FN", 20), ("S4", 21), ("U4", 22), ("F8E4M3B11FNUZ", 23),
        ("F8E5M2FNUZ", 24), ("F8E4M3FNUZ", 25), ("S2", 26), ("U2", 27), ("F8E4M3", 28),
        ("F8E3M4", 29), ("S1", 30), ("U1", 31), ("F4E2M1FN", 32), ("F8E8M0FNU", 33), ("BUFFER", 34),
    ],
    "RandomDistribution": [("RNG_INVALID", 0), ("RNG_UNIFORM", 1), ("RNG_NORMAL", 2)],
    "RandomAlgorithm": [("RNG_DEFAULT", 0), ("RNG_THREE_FRY", 1), ("RNG_PHILOX", 2)],
    "FftType": [("FFT", 0), ("IFFT", 1), ("RFFT", 2), ("IRFFT", 3)],
    "Transpose": [("TRANSPOSE_INVALID", 0), ("NO_TRANSPOSE", 1), ("TRANSPOSE", 2), ("ADJOINT", 3)],
    "Precision": [("DEFAULT", 0), ("HIGH", 1), ("HIGHEST", 2)],
    "CustomCallSchedule": [("SCHEDULE_NONE", 0), ("SCHEDULE_LATEST", 1), ("SCHEDULE_EARLIEST", 2)],
    "CustomCallApiVersion": [("API_VERSION_UNSPECIFIED", 0), ("API_VERSION_ORIGINAL", 1),
                             ("API_VERSION_STATUS_RETURNING", 2),
                             ("API_VERSION_STATUS_RETURNING_UNIFIED", 3), ("API_VERSION_TYPED_FFI", 4)],
    "ShardingType": [("REPLICATED", 0), ("MAXIMAL", 1), ("TUPLE", 2), ("OTHER", 3), ("MANUAL", 4),
                     ("UNKNOWN", 5), ("UNREDUCED", 6)],
    "AliasKind": [("UNDEFINED_ALIAS", 0), ("MAY_ALIAS", 1), ("MUST_ALIAS", 2)],
}

# message name -> [(field name, number, type, repeated?)]. A type that is not a
# scalar names a message or an enum of this schema; "map<string,string>" is a map.
MESSAGES = {
    "LayoutProto": [("minor_to_major", 1, "int64", True), ("memory_space", 8, "int64", False),
                    ("element_size_in_bits", 7, "int64", False)],
    "ShapeProto": [("element_type", 2, "PrimitiveType", False), ("dimensions", 3, "int64", True),
                   ("tuple_shapes", 4, "ShapeProto", True), ("layout", 5, "LayoutProto", False),
                   ("is_dynamic_dimension", 6, "bool", True)],
    "ProgramShapeProto": [("parameters", 1, "ShapeProto", True), ("result", 2, "ShapeProto", False),
                          ("parameter_names", 3, "string", True)],
    "OpMetadata": [("op_type", 1, "string", False), ("op_name", 2, "string", False),
                   ("source_file", 3, "string", False), ("source_line", 4, "int32", False),
                   ("deduplicated_name", 12, "string", False), ("stack_frame_id", 15, "int32", False),
                   ("scheduling_name", 16, "string", False), ("source_end_line", 17, "int32", False),
                   ("source_column", 18, "int32", False), ("source_end_column", 19, "int32", False)],
    "LiteralProto": [
        ("shape", 1, "ShapeProto", False), ("preds", 2, "bool", True), ("u8s", 3, "bytes", False),
        ("s32s", 4, "int32", True), ("s64s", 5, "int64", True), ("u32s", 6, "uint32", True),
        ("u64s", 7, "uint64", True), ("f32s", 8, "float", True), ("f64s", 9, "double", True),
        ("tuple_literals", 10, "LiteralProto", True), ("f16s", 11, "bytes", False),
        ("c64s", 12, "float", True), ("bf16s", 13, "bytes", False), ("s8s", 15, "bytes", False),
        ("u16s", 16, "bytes", False), ("s16s", 17, "bytes", False), ("c128s", 18, "double", True),
        ("f8e5m2s", 19, "bytes", False), ("f8e4m3fns", 20, "bytes", False),
        ("s4s", 21, "bytes", False), ("u4s", 22, "bytes", False),
        ("f8e4m3b11fnuzs", 23, "bytes", False), ("f8e5m2fnuzs", 24, "bytes", False),
        ("f8e4m3fnuzs", 25, "bytes", False), ("f8e4m3s", 28, "bytes", False),
        ("f8e3m4s", 29, "bytes", False)],
    "WindowDimension": [("size", 1, "int64", False), ("stride", 2, "int64", False),
                        ("padding_low", 3, "int64", False), ("padding_high", 4, "int64", False),
                        ("window_dilation", 5, "int64", False), ("base_dilation", 6, "int64", False),
                        ("window_reversal", 7, "bool", False)],
    "Window": [("dimensions", 1, "WindowDimension", True)],
    "GatherDimensionNumbers": [("offset_dims", 1, "int64", True), ("collapsed_slice_dims", 2, "int64", True),
                               ("start_index_map", 3, "int64", True), ("index_vector_dim", 4, "int64", False),
                               ("operand_batching_dims", 5, "int64", True),
                               ("start_indices_batching_dims", 6, "int64", True)],
    "ScatterDimensionNumbers": [("update_window_dims", 1, "int64", True),
                                ("inserted_window_dims", 2, "int64", True),
                                ("scatter_dims_to_operand_dims", 3, "int64", True),
                                ("index_vector_dim", 4, "int64", False),
                                ("input_batching_dims", 5, "int64", True),
                                ("scatter_indices_batching_dims", 6, "int64", True)],
    "ConvolutionDimensionNumbers": [
        ("kernel_input_feature_dimension", 3, "int64", False),
        ("kernel_output_feature_dimension", 4, "int64", False),
        ("kernel_spatial_dimensions", 6, "int64", True), ("input_batch_dimension", 7, "int64", False),
        ("input_feature_dimension", 8, "int64", False), ("output_batch_dimension", 9, "int64", False),
        ("output_feature_dimension", 10, "int64", False), ("input_spatial_dimensions", 11, "int64", True),
        ("output_spatial_dimensions", 12, "int64", True)],
    "DotDimensionNumbers": [("lhs_contracting_dimensions", 1, "int64", True),
                            ("rhs_contracting_dimensions", 2, "int64", True),
                            ("lhs_batch_dimensions", 3, "int64", True),
                            ("rhs_batch_dimensions", 4, "int64", True)],
    "PaddingConfigDimension": [("edge_padding_low", 1, "int64", False), ("edge_padding_high", 2, "int64", False),
                               ("interior_padding", 3, "int64", False)],
    "PaddingConfig": [("dimensions", 1, "PaddingConfigDimension", True)],
    "PrecisionConfig": [("operand_precision", 1, "Precision", True), ("algorithm", 2, "int32", False)],
    "FrontendAttributes": [("map", 1, "map<string,string>", False)],
    "OpSharding": [("type", 1, "ShardingType", False), ("tile_shape", 2, "ShapeProto", False),
                   ("tile_assignment_dimensions", 3, "int64", True),
                   ("tile_assignment_devices", 4, "int64", True),
                   ("tuple_shardings", 5, "OpSharding", True),
                   ("replicate_on_last_tile_dim", 6, "bool", False),
                   ("last_tile_dims", 8, "ShardingType", True),
                   ("iota_reshape_dims", 9, "int64", True), ("iota_transpose_perm", 10, "int32", True)],
    "TriangularSolveOptions": [("left_side", 1, "bool", False), ("lower", 2, "bool", False),
                               ("unit_diagonal", 3, "bool", False), ("transpose_a", 4, "Transpose", False)],
    "CholeskyOptions": [("lower", 1, "bool", False)],
    "ReplicaGroup": [("replica_ids", 1, "int64", True)],
    "IotaReplicaGroupListProto": [("num_replica_groups", 1, "int64", False),
                                  ("num_devices_per_group", 2, "int64", False),
                                  ("iota_reshape_dims", 3, "int64", True), ("iota_transpose_perm", 4, "int32", True)],
    "CollectiveDeviceListProto": [("replica_groups", 1, "ReplicaGroup", True),
                                  ("iota_replica_group_list", 2, "IotaReplicaGroupListProto", False)],
    "SourceTarget": [("source", 1, "int64", False), ("target", 2, "int64", False)],
    "OutputOperandAliasing": [("output_shape_index", 1, "int64", True), ("operand_index", 2, "int64", False),
                              ("operand_shape_index", 3, "int64", True)],
    "SliceDimensions": [("start", 1, "int64", False), ("limit", 2, "int64", False),
                        ("stride", 3, "int64", False)],
    "HloInstructionProto": [
        ("name", 1, "string", False), ("opcode", 2, "string", False), ("shape", 3, "ShapeProto", False),
        ("metadata", 7, "OpMetadata", False), ("literal", 8, "LiteralProto", False),
        ("parameter_number", 9, "int64", False), ("fusion_kind", 11, "string", False),
        ("tuple_index", 13, "int64", False), ("dimensions", 14, "int64", True),
        ("window", 15, "Window", False),
        ("convolution_dimension_numbers", 16, "ConvolutionDimensionNumbers", False),
        ("slice_dimensions", 17, "SliceDimensions", True), ("exponent_bits", 18, "int32", False),
        ("mantissa_bits", 19, "int32", False), ("dynamic_slice_sizes", 20, "int64", True),
        ("padding_config", 21, "PaddingConfig", False), ("outfeed_config", 22, "bytes", False),
        ("distribution", 23, "RandomDistribution", False), ("epsilon", 24, "float", False),
        ("feature_index", 25, "int64", False), ("channel_id", 26, "int64", False),
        ("infeed_config", 27, "bytes", False), ("custom_call_target", 28, "string", False),
        ("outfeed_shape", 29, "ShapeProto", False),
        ("dot_dimension_numbers", 30, "DotDimensionNumbers", False), ("fft_type", 31, "FftType", False),
        ("triangular_solve_options", 59, "TriangularSolveOptions", False),
        ("cholesky_options", 62, "CholeskyOptions", False),
        ("fft_length", 32, "int64", True), ("gather_dimension_numbers", 33, "GatherDimensionNumbers", False),
        ("gather_slice_sizes", 34, "int64", True), ("id", 35, "int64", False),
        ("operand_ids", 36, "int64", True), ("control_predecessor_ids", 37, "int64", True),
        ("called_computation_ids", 38, "int64", True), ("sharding", 40, "OpSharding", False),
        ("backend_config", 43, "bytes", False), ("is_host_transfer", 47, "bool", False),
        ("scatter_dimension_numbers", 48, "ScatterDimensionNumbers", False),
        ("replica_groups", 49, "ReplicaGroup", True), ("feature_group_count", 50, "int64", False),
        ("precision_config", 51, "PrecisionConfig", False),
        ("source_target_pairs", 52, "SourceTarget", True), ("constrain_layout", 56, "bool", False),
        ("operand_shapes_with_layout", 57, "ShapeProto", True), ("batch_group_count", 58, "int64", False),
        ("is_stable", 60, "bool", False), ("comparison_direction", 63, "string", False),
        ("custom_call_has_side_effect", 65, "bool", False), ("delta", 66, "int64", False),
        ("indices_are_sorted", 67, "bool", False), ("frontend_attributes", 68, "FrontendAttributes", False),
        ("unique_indices", 69, "bool", False), ("rng_algorithm", 70, "RandomAlgorithm", False),
        ("use_global_device_ids", 71, "bool", False), ("comparison_type", 72, "string", False),
        ("output_operand_aliasing", 74, "OutputOperandAliasing", True),
        ("custom_call_schedule", 76, "CustomCallSchedule", False),
        ("custom_call_api_version", 77, "CustomCallApiVersion", False),
        ("k", 81, "int64", False), ("largest", 85, "bool", False),
        ("collective_device_list", 87, "CollectiveDeviceListProto", False), ("is_composite", 89, "bool", False),
        # where XLA (jaxlib 0.10) serialises an iota-form replica_groups=[G,S]<=[...]
        ("iota_replica_group_list", 92, "IotaReplicaGroupListProto", False)],
    "HloComputationProto": [("name", 1, "string", False), ("instructions", 2, "HloInstructionProto", True),
                            ("program_shape", 4, "ProgramShapeProto", False), ("id", 5, "int64", False),
                            ("root_id", 6, "int64", False), ("is_fusion_computation", 7, "bool", False),
                            ("execution_thread", 8, "string", False)],
    "AliasEntryProto": [("output_shape_index", 1, "int64", True), ("parameter_number", 2, "int64", False),
                        ("parameter_shape_index", 3, "int64", True), ("kind", 4, "AliasKind", False)],
    "HloInputOutputAliasProto": [("entries", 1, "AliasEntryProto", True)],
    "FileLocation": [("file_name_id", 1, "int32", False), ("function_name_id", 2, "int32", False),
                     ("line", 3, "int32", False), ("column", 4, "int32", False)],
    "StackFrame": [("file_location_id", 1, "int32", False), ("parent_frame_id", 2, "int32", False)],
    "StackFrameIndexProto": [("file_names", 1, "string", True), ("function_names", 2, "string", True),
                             ("file_locations", 3, "FileLocation", True),
                             ("stack_frames", 4, "StackFrame", True)],
    "ComputationDevice": [("replica_device_ids", 1, "int64", True)],
    "DeviceAssignmentProto": [("replica_count", 1, "int32", False), ("computation_count", 2, "int32", False),
                              ("computation_devices", 3, "ComputationDevice", True)],
    "HloModuleProto": [("name", 1, "string", False), ("entry_computation_name", 2, "string", False),
                       ("computations", 3, "HloComputationProto", True),
                       ("host_program_shape", 4, "ProgramShapeProto", False), ("id", 5, "int64", False),
                       ("entry_computation_id", 6, "int64", False),
                       ("input_output_alias", 8, "HloInputOutputAliasProto", False),
                       ("is_dynamic", 11, "bool", False),
                       ("device_assignment", 15, "DeviceAssignmentProto", False),
                       ("stack_frame_index", 17, "StackFrameIndexProto", False),
                       ("frontend_attributes", 19, "FrontendAttributes", False)],
    "HloProto": [("hlo_module", 1, "HloModuleProto", False)],
}

_PACKAGE = "neuronxcc_hlo_schema"


def _varint(n):
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _ld(num, payload):
    """Field ``num`` of wire type 2 (length-delimited): a string or a sub-message."""
    payload = payload.encode("utf-8") if isinstance(payload, str) else payload
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def _vi(num, value):
    """Field ``num`` of wire type 0 (varint)."""
    return _varint(num << 3) + _varint(value)


def _field(name, number, label, ftype, type_name=None, json_name=None):
    # FieldDescriptorProto: name 1, number 3, label 4, type 5, type_name 6, json_name 10
    out = _ld(1, name) + _vi(3, number) + _vi(4, label) + _vi(5, ftype)
    if type_name is not None:
        out += _ld(6, type_name)
    if json_name is not None:
        out += _ld(10, json_name)
    return out


def _file_bytes():
    """The serialized FileDescriptorProto of the schema (fields in number order, as protobuf's
    own serializer writes them; tests check the bytes against ``descriptor_pb2``'s)."""
    enums = b""
    for ename, values in ENUMS.items():
        # EnumDescriptorProto: name 1, value 2 (EnumValueDescriptorProto: name 1, number 2); value
        # names share the package scope: prefixed per enum
        enums += _ld(5, _ld(1, ename) + b"".join(_ld(2, _ld(1, "%s_%s" % (ename, v)) + _vi(2, n))
                                                  for v, n in values))
    msgs = b""
    for mname, fields in MESSAGES.items():
        # DescriptorProto: name 1, field 2, nested_type 3, options 7 (MessageOptions.map_entry 7)
        body, nested = b"", b""
        for fname, num, ftype, repeated in fields:
            label = LABEL_REPEATED if repeated else LABEL_OPTIONAL
            if ftype.startswith("map<"):
                entry = fname.capitalize() + "Entry"
                nested += _ld(3, _ld(1, entry) + _ld(2, _field("key", 1, LABEL_OPTIONAL, TYPE_STRING))
                              + _ld(2, _field("value", 2, LABEL_OPTIONAL, TYPE_STRING)) + _ld(7, _vi(7, 1)))
                body += _ld(2, _field(fname, num, LABEL_REPEATED, TYPE_MESSAGE,
                                      ".%s.%s.%s" % (_PACKAGE, mname, entry), fname))
            elif ftype in _SCALARS:
                body += _ld(2, _field(fname, num, label, _SCALARS[ftype], None, fname))
            elif ftype in ENUMS:
                body += _ld(2, _field(fname, num, label, TYPE_ENUM, ".%s.%s" % (_PACKAGE, ftype), fname))
            else:
                assert ftype in MESSAGES, ftype
                body += _ld(2, _field(fname, num, label, TYPE_MESSAGE, ".%s.%s" % (_PACKAGE, ftype), fname))
        msgs += _ld(4, _ld(1, mname) + body + nested)
    # FileDescriptorProto: name 1, package 2, message_type 4, enum_type 5, syntax 12
    return _ld(1, "neuronxcc_hlo_schema.proto") + _ld(2, _PACKAGE) + msgs + enums + _ld(12, "proto3")


def _message_classes():
    """{name: message class} over a private pool holding the schema."""
    try:    # protobuf's upb backend, without its Python descriptor layer
        from google._upb import _message as upb
        from google.protobuf.message import Message
    except ImportError:
        upb = None
    if upb is not None:
        pool = upb.DescriptorPool()
        pool.AddSerializedFile(_file_bytes())
        return pool, {n: upb.MessageMeta(n, (Message,), {"DESCRIPTOR": pool.FindMessageTypeByName(_PACKAGE + "." + n),
                                                         "__module__": __name__}) for n in MESSAGES}
    from google.protobuf import descriptor_pool, message_factory
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(_file_bytes())
    return pool, {n: message_factory.GetMessageClass(pool.FindMessageTypeByName(_PACKAGE + "." + n))
                  for n in MESSAGES}


POOL, _CLASSES = _message_classes()
globals().update(_CLASSES)

# PrimitiveType number <-> lower-case HLO text name ("f32", "pred", "tuple", ...)
PRIMITIVE_TYPE_NAMES = {num: name.lower() for name, num in ENUMS["PrimitiveType"]}
PRIMITIVE_TYPE_NAMES[14] = "opaque"
PRIMITIVE_TYPE_NAMES[0] = "invalid"
PRIMITIVE_TYPE_NUMBERS = {v: k for k, v in PRIMITIVE_TYPE_NAMES.items()}


def enum_name(enum, number):
    """Value name of ``number`` in schema enum ``enum`` (without prefix), or None."""
    for vname, num in ENUMS[enum]:
        if num == number:
            return vname
    return None


def enum_number(enum, name):
    for vname, num in ENUMS[enum]:
        if vname == name:
            return num
    raise KeyError(name)
