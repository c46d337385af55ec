"""Test helpers: JAX function -> HLO -> Penguin -> BIR (-> birsim) without the CLI."""
import numpy as np

TOL = {"float32": (2e-4, 2e-5), "bfloat16": (3e-2, 3e-2), "float16": (3e-3, 3e-3)}


def hlo_bytes(f, *args):
    import jax
    return jax.jit(f).lower(*args).compiler_ir("hlo").as_serialized_hlo_module_proto()


def penguin_of(f, *args):
    from neuronxcc.hlo import load_module
    from neuronxcc.starfish.penguin.hlo2penguin import hlo_to_penguin
    return hlo_to_penguin(load_module(hlo_bytes(f, *args)))


def bir_of(f, *args):
    from neuronxcc.starfish.penguin.codegen import lower_graph
    return lower_graph(penguin_of(f, *args))


def jax_outputs(f, *args):
    import jax
    res = jax.jit(f)(*args)
    leaves = jax.tree_util.tree_leaves(res)
    return [np.asarray(r) for r in leaves]


def assert_close(actual, expected, what=""):
    a = np.asarray(actual)
    e = np.asarray(expected)
    assert a.shape == e.shape, "%s: shape %s != %s" % (what, a.shape, e.shape)
    if e.dtype.kind in "biu":
        bad = np.count_nonzero(a.astype(e.dtype) != e)
        assert bad == 0, "%s: %d of %d elements differ" % (what, bad, e.size)
        return
    rtol, atol = TOL.get(str(e.dtype), (2e-4, 2e-5))
    a64 = a.astype(np.float64)
    e64 = e.astype(np.float64)
    scale = max(1.0, float(np.max(np.abs(e64[np.isfinite(e64)])))) if np.isfinite(e64).any() else 1.0
    err = np.abs(a64 - e64)
    ok = (err <= atol * scale + rtol * np.abs(e64)) | (np.isnan(a64) & np.isnan(e64)) | (a64 == e64)
    assert ok.all(), "%s: max abs err %.3g (scale %.3g), %d bad of %d" % (what, float(np.nanmax(err)), scale,
                                                                         int((~ok).sum()), e.size)


def run_bir(module, args):
    from neuronxcc.starfish import birsim
    return birsim.run_module(module, [np.asarray(a) for a in args])


def check(f, *args):
    """Compile f through Penguin, run on birsim, compare with jax."""
    mod = bir_of(f, *args)
    outs = run_bir(mod, args)
    exp = jax_outputs(f, *args)
    assert len(outs) == len(exp)
    for k, (a, e) in enumerate(zip(outs, exp)):
        assert_close(a, e, "output%d" % k)
    return mod
