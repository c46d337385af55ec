"""penguin/intrange.py's cache: ranges are keyed by the instruction objects themselves."""
import copy
import gc


def test_ranges_are_keyed_by_the_instruction_not_its_id():
    # an id is reused once its object dies: a cache keyed by id(inst) would hand a dead
    # instruction's range to a new one that lands at the same address
    from neuronxcc.hlo import load_module
    from neuronxcc.starfish.penguin import intrange
    m = load_module("""HloModule r
ENTRY e {
  k = s32[8] parameter(0)
  lo = s32[] constant(0)
  hi = s32[] constant(31)
  d = s32[8] clamp(lo, k, hi)
  ROOT r = s32[8] add(d, d)
}""")
    comp = m.entry
    d = [i for i in comp.instructions if i.opcode == "clamp"][0]
    root = comp.root
    assert intrange.of(m, d) == (0, 31)
    assert intrange.of(m, root) == (0, 62)
    dead = id(d)
    comp.instructions.remove(d)         # the module drops the clamp (as a rewrite would)
    k = d.operands[1]
    root.operands = [k, k]
    del d
    gc.collect()
    fresh = [copy.copy(root) for _ in range(200)]
    assert all(intrange.of(m, f) is None for f in fresh)
    assert not any(id(f) == dead for f in fresh)    # the cache keeps what it answered for alive
