"""The Frontend and StaticIOTranspose library entries the driver's jobs call."""
import json

import numpy as np
import pytest

from penguin_helpers import penguin_of
from neuronxcc.starfish import birpy
from neuronxcc.starfish.penguin import ir
from neuronxcc.starfish.penguin.frontend import run_frontend
from neuronxcc.starfish.penguin.io_transpose import write_io_transposes


def test_run_frontend_writes_unallocated_bir_and_io_transposes(tmp_path):
    g = penguin_of(lambda a, b: (a @ b + 1.0, a.sum()), np.ones((130, 40), np.float32),
                   np.ones((40, 20), np.float32))
    ir.save(g, str(tmp_path / "penguin.json"))
    out = run_frontend(str(tmp_path / "penguin.json"), str(tmp_path / "sg00"), target="trn1", custom_op_libs=())
    m = birpy.load(out)
    assert m.inputs == ["input0", "input1"] and m.outputs == ["output0", "output1"]
    assert m.memlocs and all(not ml.allocated for ml in m.memlocs.values())
    for ml in m.memlocs.values():
        assert ml.partitions <= 128
        assert ml.bytes_per_partition <= (2048 if ml.memory == "PSUM" else 64 * 1024)
    assert all(i.name for i in m.instructions())          # every instruction names its HLO op
    # Penguin codegen stores every I/O tensor in its HLO shape, row-major: so no transposes
    assert [m.tensors[n].shape for n in m.inputs] == [(130, 40), (40, 20)]
    assert [m.tensors[n].shape for n in m.outputs] == [(130, 20), ()] or \
        [m.tensors[n].shape for n in m.outputs] == [(130, 20), (1,)]
    write_io_transposes(out, str(tmp_path / "io_transposes.json"))
    doc = json.load(open(tmp_path / "io_transposes.json"))
    assert doc == {"version": 1, "transposes": []}
    # a module that records a layout change gets it written, entry for entry
    entry = {"name": "input1", "kind": "input", "shape": [40, 20], "permutation": [1, 0]}
    m.attrs["io_transposes"] = [entry]
    birpy.save(m, str(tmp_path / "t.json"))
    write_io_transposes(str(tmp_path / "t.json"), str(tmp_path / "io2.json"))
    assert json.load(open(tmp_path / "io2.json")) == {"version": 1, "transposes": [entry]}


def test_lowering_gap_is_a_one_line_error_naming_the_instruction(tmp_path):
    import jax
    from neuronxcc.starfish.penguin.tiles import LoweringError

    def f(x, w):     # a depthwise convolution of more window positions than its kernel unrolls (a
        return jax.lax.conv_general_dilated(     # reduce-window of as many positions is split now)
            x, w, (1, 1), "VALID", feature_group_count=3, dimension_numbers=("NCHW", "OIHW", "NCHW"))
    g = penguin_of(f, np.ones((1, 3, 20, 20), np.float32), np.ones((3, 1, 9, 9), np.float32))
    ir.save(g, str(tmp_path / "p.json"))
    with pytest.raises(LoweringError) as ei:
        run_frontend(str(tmp_path / "p.json"), str(tmp_path / "sg00"))
    line = ei.value.one_line()
    assert line.startswith("[NCC_EPEN001]") and "'convolution'" in line and "test_frontend.py:" in line
    assert not (tmp_path / "sg00" / "bir.json").exists()
