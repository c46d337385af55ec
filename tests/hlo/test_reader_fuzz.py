"""Property tests: random and mutated inputs never crash the readers.

Whatever the bytes, ``load_module`` either returns a module or raises one of
the compiler's own errors (InputFileError/HloParseError, HloVerifyError,
TensorTooLargeError), never another exception type and never the reader's
internal-error fallback; hypothesis' deadline catches hangs.
"""
import os
import sys

from hypothesis import HealthCheck, given, settings, strategies as st

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reader_corpus as rc  # noqa: E402

from neuronxcc.errors import CompilerError  # noqa: E402
from neuronxcc.hlo import load_module  # noqa: E402
from neuronxcc.hlo.compare import diff_modules  # noqa: E402
from neuronxcc.hlo import module_to_proto_bytes

SETTINGS = settings(max_examples=int(os.environ.get("HLO_FUZZ_EXAMPLES", "150")), deadline=3000,
                    suppress_health_check=list(HealthCheck), derandomize="HLO_FUZZ_EXAMPLES" not in os.environ)


def _read(data):
    try:
        m = load_module(data)
    except CompilerError as e:
        assert not getattr(e, "unexpected", False), e.message
        assert e.one_line().startswith("[NCC_") and "\n" not in e.one_line()
        return None
    # anything read must also write and read back
    again = load_module(module_to_proto_bytes(m), verify=False)
    assert diff_modules(m, again) == []
    return m


@SETTINGS
@given(st.binary(max_size=300))
def test_random_bytes(data):
    _read(data)


@SETTINGS
@given(st.text(alphabet="HloModule ENTRY ROOT{}()[],=%:.-_0123456789abcdefxyzf32s32pred\n\"", max_size=300))
def test_random_text(text):
    _read(("HloModule m\n" + text).encode())


def _mutate(data, edits):
    data = bytearray(data)
    for kind, pos, val in edits:
        if not data:
            break
        pos %= len(data)
        if kind == 0:
            data[pos] = val
        elif kind == 1:
            del data[pos:pos + 1 + val % 8]
        elif kind == 2:
            data[pos:pos] = bytes([val]) * (1 + val % 3)
        else:
            data = data[:pos]
    return bytes(data)


EDITS = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 1 << 20), st.integers(0, 255)), min_size=1,
                 max_size=6)


@SETTINGS
@given(st.sampled_from(["mlp", "while", "cond", "gather_scatter", "constants"]), EDITS)
def test_mutated_protos(name, edits):
    _read(_mutate(rc.lowered(name)[0], edits))


TEXT_EDITS = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 1 << 20),
                                st.sampled_from(b"{}()[],=%:.-_0189x\n\" efsROOT")), min_size=1, max_size=6)


@SETTINGS
@given(st.sampled_from(["mlp", "while", "cond", "conv", "constants", "custom_call"]), TEXT_EDITS)
def test_mutated_text(name, edits):
    _read(_mutate(rc.lowered(name)[1].encode(), edits))


@SETTINGS
@given(st.sampled_from(["sort", "shapes", "pool"]), st.integers(0, 1 << 20), st.integers(1, 40))
def test_text_with_a_line_cut_out(name, pos, length):
    text = rc.lowered(name)[2]
    pos %= len(text)
    _read((text[:pos] + text[pos + length:]).encode())


# -- structured mutations: valid protos with one field of one instruction changed -------------------------

def _mutate_fields(pb, picks):
    from neuronxcc.hlo import schema
    mp = schema.HloModuleProto()
    mp.ParseFromString(pb)
    instrs = [ip for cp in mp.computations for ip in cp.instructions]
    for which, kind, val in picks:
        ip = instrs[which % len(instrs)]
        if kind == 0:
            ip.opcode = ["add", "tuple", "dot", "reduce", "while", "custom-call", "gather", "nonsense", ""][val % 9]
        elif kind == 1 and len(ip.operand_ids):
            ip.operand_ids[val % len(ip.operand_ids)] = instrs[val % len(instrs)].id + (val % 3)
        elif kind == 2:
            ip.shape.dimensions.append(val % 5)
        elif kind == 3 and len(ip.shape.dimensions):
            ip.shape.dimensions[val % len(ip.shape.dimensions)] = (val % 7) - 1
        elif kind == 4:
            ip.shape.element_type = val % 40
        elif kind == 5:
            ip.shape.layout.minor_to_major.append(val % 4)
        elif kind == 6:
            ip.dimensions.append(val % 6 - 1)
        elif kind == 7:
            ip.parameter_number = val % 4
        elif kind == 8:
            ip.called_computation_ids.append(val % 8)
        elif kind == 9 and ip.HasField("literal"):
            ip.literal.f32s.append(1.0)
        elif kind == 10:
            ip.tuple_index = val % 5 - 1
        elif kind == 11:
            del ip.operand_ids[:]
        elif kind == 12:
            ip.slice_dimensions.add(start=val % 3, limit=val % 5, stride=val % 2)
        elif kind == 13:
            ip.gather_dimension_numbers.index_vector_dim = val % 4
        elif kind == 14:
            mp.entry_computation_id = val % 9
    return mp.SerializeToString()


FIELD_EDITS = st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 14), st.integers(0, 1000)), min_size=1,
                       max_size=3)


@SETTINGS
@given(st.sampled_from(["mlp", "while", "cond", "gather_scatter", "sort", "conv", "shapes"]), FIELD_EDITS)
def test_field_mutated_protos(name, picks):
    _read(_mutate_fields(rc.lowered(name)[0], picks))
