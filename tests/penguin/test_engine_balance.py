"""Codegen's ACT/DVE/POOL balancing (``Emitter.engine_load``) counts the work of the kernel being
emitted only: an earlier kernel's work does not change where a later kernel's instructions go."""
import jax
import jax.numpy as jnp

from penguin_helpers import bir_of

S = jax.ShapeDtypeStruct((128, 2048), jnp.float32)


def _engines_of(mod, label_prefix):
    return [i.engine for i in mod.instructions() if not i.opcode.startswith("dma") and
            (i.name or "").startswith(label_prefix)]


def test_a_kernel_is_balanced_on_its_own_work():
    alone = bir_of(lambda y: y + 1.0, S)
    # exp(x) puts 2048-element activations on ACT in the kernel before y + 1
    after_act_work = bir_of(lambda x, y: (jnp.exp(x), y + 1.0), S, S)
    first = _engines_of(alone, "add")
    assert first and _engines_of(after_act_work, "add") == first
    # x + c on an empty kernel goes to ACT (identity with a bias: ACT has less queued than DVE)
    assert first == ["ACT"]
    assert "ACT" in _engines_of(after_act_work, "exp")


def test_the_counts_restart_per_kernel():
    from neuronxcc.hwm import get_target
    from neuronxcc.starfish import birpy as B
    from neuronxcc.starfish.penguin.emit import Emitter
    m = B.Module("k")
    m.add_memloc("a", "SBUF", 128, 4096)
    em = Emitter(m, get_target("trn1"))
    em.inst("memset", "DVE", [em.chip("a", "float32", 128, [[1, 1024]])], [], value=0.0)
    assert em.engine_load["DVE"] == 1024 / 1.12
    em.begin_kernel()
    assert em.engine_load == {"DVE": 0.0, "ACT": 0.0, "POOL": 0.0}
