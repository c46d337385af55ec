"""Machine-state buffers are reused across simulations (birsim.state's pool): a
later run still sees poison (0xFF -> NaN) in memory it never wrote, even where
an earlier run wrote values, and a view that outlives its state keeps its data."""
import gc

import numpy as np

from neuronxcc.hwm import get_target
from neuronxcc.starfish import birpy as B
from neuronxcc.starfish.birsim import simulate
from neuronxcc.starfish.birsim.state import MachineState

F = 1024        # 128 x 4 KiB tiles: big enough for the pool


def _module(write):
    m = B.Module("reuse")
    m.add_tensor("x", "input", "float32", (128, F))
    m.add_tensor("y", "output", "float32", (128, F))
    m.add_memloc("t", "SBUF", 128, F * 4, start_partition=0, byte_offset=0)
    m.add_memloc("big", "SBUF", 128, 8 * F * 4)          # unallocated: a private buffer
    b = B.Builder(m)
    t = B.AccessPattern("t", "float32", 0, [[1, F]], 0, 128)
    big = B.AccessPattern("big", "float32", 0, [[1, F]], 0, 128)
    if write:
        b.inst("dma_copy", "SP", [t], [b.ap("x")], queue="q0")
        b.inst("dma_copy", "SP", [big], [b.ap("x")], queue="q0")
        b.inst("dma_copy", "SP", [b.ap("y")], [t], queue="q1")
    else:
        b.inst("tensor_tensor", "DVE", [t], [t, big], op="add")
        b.inst("dma_copy", "SP", [b.ap("y")], [t], queue="q1")
    return b.finish()


def test_second_run_sees_poison_not_the_first_runs_data():
    x = np.ones((128, F), np.float32)
    for _ in range(3):
        out = simulate(_module(True), [x]).outputs[0]
        assert np.array_equal(out, x)
        gc.collect()
        out = simulate(_module(False), [x]).outputs[0]
        assert np.isnan(out).all()
        gc.collect()


def test_a_view_outliving_its_state_is_not_reused():
    m = _module(True)
    st = MachineState(m, get_target("trn1"))
    st.set_input("x", np.full((128, F), 7, np.float32))
    view = st.targets["x"].buf
    del st
    gc.collect()
    for _ in range(3):
        s2 = MachineState(m, get_target("trn1"))
        s2.set_input("x", np.zeros((128, F), np.float32))
        del s2
        gc.collect()
    assert (view.view(np.float32) == 7).all()


_RSS_PROBE = r"""
import os, sys
import numpy as np
from neuronxcc.hwm import get_target
from neuronxcc.starfish import birpy as B
from neuronxcc.starfish.birsim.state import MachineState

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

m = B.Module("small")
m.add_tensor("x", "input", "float32", (128, 16))
m.add_memloc("t", "SBUF", 128, 64, start_partition=0, byte_offset=0)
m.add_memloc("p", "PSUM", 128, 64, start_partition=0, byte_offset=0)
tm = get_target("trn1")
before = rss()
st = MachineState(m, tm)
grew = rss() - before
sbuf = st.shared["SBUF"]
assert sbuf.nbytes == tm.num_partitions * tm.sbuf_partition_bytes
assert (sbuf.reshape(tm.num_partitions, -1)[:, :64] == 0xFF).all()
print(grew, sbuf.nbytes)
"""


def test_fresh_sbuf_backs_only_the_pages_its_memlocs_use():
    """A small program's first simulation in a process pays for the SBUF bytes it can address,
    not for the whole 128 x 192 KiB array (numpy's huge-page advice made the kernel zero every
    2 MiB page the 128 rows cross)."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", _RSS_PROBE], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    grew, total = map(int, r.stdout.split())
    assert grew < total // 4, (grew, total)


def test_fresh_sbuf_is_not_shared_with_a_forked_child():
    import os

    m = _module(True)
    st = MachineState(m, get_target("trn1"))
    sbuf = st.shared["SBUF"]
    before = bytes(sbuf[:16])
    pid = os.fork()
    if pid == 0:
        sbuf[:16] = 0x11
        os._exit(0)
    os.waitpid(pid, 0)
    assert bytes(sbuf[:16]) == before
