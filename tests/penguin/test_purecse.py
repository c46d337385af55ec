"""Input-independent tables materialised once (penguin/purecse.py): the Llama rotary embedding of
q and of k builds its cos / sin tables from positions twice in the HLO; the second pair reads the
first's tensors, and the results match jax (compiled tolerance row). A table computed from an
input is not shared. Untimed."""
import jax.numpy as jnp
import ml_dtypes
import numpy as np

from penguin_helpers import check, rotary as _rotary


def _qk(q, k):
    return _rotary(q), _rotary(k)


def _tables(mod, t, half):
    return [n for n, v in mod.tensors.items() if v.kind == "scratch" and tuple(v.shape) == (t, 1, half)]


def test_rotary_tables_of_q_and_k_are_computed_once():
    rng = np.random.default_rng(0)
    q = rng.standard_normal((256, 4, 64)).astype(ml_dtypes.bfloat16)
    k = rng.standard_normal((256, 2, 64)).astype(ml_dtypes.bfloat16)
    mod = check(_qk, q, k)
    assert len(_tables(mod, 256, 32)) == 2, _tables(mod, 256, 32)        # cos and sin, once each


def test_tables_of_an_input_are_not_shared(monkeypatch):
    from neuronxcc.starfish.penguin import purecse
    from neuronxcc.starfish.penguin.expr import Node
    keyed = []
    real = purecse.key

    def spy(cg, x, memo=None):
        k = real(cg, x, memo)
        if memo is None and isinstance(x, Node) and k is not None:
            keyed.append(x.op)
        return k
    monkeypatch.setattr(purecse, "key", spy)

    def two(x, p):
        a = jnp.cos(p.astype(jnp.float32))[:, None] * x
        b = jnp.cos(p.astype(jnp.float32))[:, None] + x
        return a, b
    rng = np.random.default_rng(1)
    x = rng.standard_normal((256, 8)).astype(np.float32)
    p = np.arange(256, dtype=np.int32)
    check(two, x, p)
    assert keyed == []             # every value reads an input: none is an input-independent table
    check(_qk, rng.standard_normal((256, 4, 64)).astype(np.float32),
          rng.standard_normal((256, 2, 64)).astype(np.float32))
    assert keyed                   # the spy sees the tables that are input-independent


def test_key_ignores_constant_names_but_not_their_data():
    from neuronxcc.starfish.penguin import purecse
    from neuronxcc.starfish.penguin.views import View

    class _T:
        def __init__(self, data):
            self.kind, self.data, self.dtype, self.shape = "const", data, "float32", data.shape

    class _Cg:
        class m:
            tensors = {"c0": _T(np.arange(4, dtype=np.float32)), "c1": _T(np.arange(4, dtype=np.float32)),
                       "c2": _T(np.ones(4, np.float32)), "x": None}
    v = {n: View(n, "float32", (4,), (1,), 0) for n in ("c0", "c1", "c2")}
    assert purecse.key(_Cg, v["c0"]) == purecse.key(_Cg, v["c1"])
    assert purecse.key(_Cg, v["c0"]) != purecse.key(_Cg, v["c2"])
    assert purecse.key(_Cg, View("x", "float32", (4,), (1,), 0)) is None
