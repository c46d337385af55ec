"""Multi-rank test programs: JAX shard_map programs over 8 host devices, and an
NxD-style per-rank HLO text, with XLA:CPU's per-rank results.

XLA's CPU client only shows 8 devices with
``XLA_FLAGS=--xla_force_host_platform_device_count=8``, set before jax is
imported; so ``generate(outdir)`` runs this module in a subprocess (the rest
of the suite keeps one device). For each program it writes

  <name>.hlo    the per-rank module jax hands the compiler: the text XLA dumps
                after its SPMD partitioner (Shardy's call to the manual
                computation body, copy chains, leftover sharding= included)
  <name>.npz    ``input{i}`` / ``output{i}`` with a leading rank axis (rank d =
                device d of the mesh = the flattened device id), as
                xla_infergoldens --ranks writes goldens

Shapes are small (hidden 64, 8 ranks) so every test stays fast.
"""
import glob
import os
import subprocess
import sys

import numpy as np

NRANKS = 8
PROGRAMS = ("tp_decoder", "sp_decoder", "dp_train", "permute_ring", "moe_all_to_all", "nxd_text", "async_iota_text")

NXD_TEXT = """HloModule nxd_row_parallel, replica_count=8

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}

ENTRY main {
  x = f32[4,32]{1,0} parameter(0)
  w = f32[32,16]{1,0} parameter(1)
  d = f32[4,16]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  r = u32[] replica-id()
  rf = f32[] convert(r)
  rb = f32[4,16]{1,0} broadcast(rf), dimensions={}
  d2 = f32[4,16]{1,0} add(d, rb)
  ar = f32[4,16]{1,0} all-reduce(d2), replica_groups={{0,1,2,3,4,5,6,7}}, to_apply=add
  mx = f32[4,16]{1,0} all-reduce(d2), replica_groups={{0,1,2,3},{4,5,6,7}}, to_apply=max
  ROOT out = f32[4,16]{1,0} add(ar, mx)
}
"""

# async -start/-done forms, iota replica groups, cross-replica reduce-scatter / all-to-all / permute
ASYNC_IOTA_TEXT = """HloModule async_iota, replica_count=8

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  x = f32[2,8]{1,0} parameter(0)
  ars = f32[2,8]{1,0} all-reduce-start(x), replica_groups=[2,4]<=[4,2]T(1,0), to_apply=add
  ard = f32[2,8]{1,0} all-reduce-done(ars)
  ags = (f32[2,8]{1,0}, f32[8,8]{1,0}) all-gather-start(x), replica_groups=[2,4]<=[8], dimensions={0}
  agd = f32[8,8]{1,0} all-gather-done(ags)
  cps = (f32[2,8]{1,0}, f32[2,8]{1,0}) collective-permute-start(ard), source_target_pairs={{0,3},{3,5},{5,0}}
  cpd = f32[2,8]{1,0} collective-permute-done(cps)
  rs = f32[1,8]{1,0} reduce-scatter(x), replica_groups={{0,1},{2,3},{4,5},{6,7}}, dimensions={0}, to_apply=add
  a2a = f32[2,8]{1,0} all-to-all(x), replica_groups={{0,1},{2,3},{4,5},{6,7}}, dimensions={0}
  ROOT t = (f32[2,8]{1,0}, f32[8,8]{1,0}, f32[2,8]{1,0}, f32[1,8]{1,0}, f32[2,8]{1,0}) tuple(ard, agd, cpd, rs, a2a)
}
"""

# 2 replicas x 4 partitions: every group mode, several operands, more reducers and dtypes. XLA:CPU
# cannot run it (a multi-partition module goes through its SPMD partitioner, which aborts on a
# hand-written per-device program), so tests check it against numpy.
MODES_TEXT = """HloModule modes, replica_count=2, num_partitions=4

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

max_i {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT m = s32[] maximum(a, b)
}

and_p {
  a = pred[] parameter(0)
  b = pred[] parameter(1)
  ROOT m = pred[] and(a, b)
}

add_bf {
  a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT s = bf16[] add(a, b)
}

ENTRY main {
  x = f32[2,4]{1,0} parameter(0)
  y = f32[3]{0} parameter(1)
  two = (f32[2,4]{1,0}, f32[3]{0}) all-reduce(x, y), replica_groups={}, to_apply=add
  two0 = f32[2,4]{1,0} get-tuple-element(two), index=0
  two1 = f32[3]{0} get-tuple-element(two), index=1
  ag = f32[16,4]{1,0} all-gather(x), channel_id=1, replica_groups={{0,1}}, dimensions={0}, use_global_device_ids=false
  k = f32[2,4]{1,0} constant({{1,2,3,4},{5,6,7,8}})
  xi = s32[2,4]{1,0} convert(x)
  mx = s32[2,4]{1,0} all-reduce(xi), channel_id=2, replica_groups={{0},{1}}, to_apply=max_i
  zero = f32[2,4]{1,0} constant({{0,0,0,0},{0,0,0,0}})
  pos = pred[2,4]{1,0} compare(x, zero), direction=GT
  allpos = pred[2,4]{1,0} all-reduce(pos), channel_id=3, replica_groups={{0,1,2,3,4,5,6,7}}, use_global_device_ids=true, to_apply=and_p
  a2a = f32[2,4]{1,0} all-to-all(x), channel_id=4, replica_groups={{0,1},{2,3}}, dimensions={0}
  cp = f32[3]{0} collective-permute(y), channel_id=5, source_target_pairs={{0,1},{1,2},{2,3},{3,0}}
  xb = bf16[2,4]{1,0} convert(x)
  sb = bf16[2,4]{1,0} all-reduce(xb), channel_id=6, replica_groups=[2,4]<=[4,2]T(1,0), use_global_device_ids=true, to_apply=add_bf
  pid = u32[] partition-id()
  rid = u32[] replica-id()
  pf = f32[] convert(pid)
  rf = f32[] convert(rid)
  pf1 = f32[1]{0} reshape(pf)
  rf1 = f32[1]{0} reshape(rf)
  ids = f32[2]{0} concatenate(pf1, rf1), dimensions={0}
  r0 = f32[8]{0} reshape(two0)
  r2 = f32[64]{0} reshape(ag)
  m3 = f32[2,4]{1,0} convert(mx)
  r3 = f32[8]{0} reshape(m3)
  m4 = f32[2,4]{1,0} convert(allpos)
  r4 = f32[8]{0} reshape(m4)
  r5 = f32[8]{0} reshape(a2a)
  m7 = f32[2,4]{1,0} convert(sb)
  r7 = f32[8]{0} reshape(m7)
  ROOT out = f32[112]{0} concatenate(r0, two1, r2, r3, r4, r5, cp, r7, ids), dimensions={0}
}
"""

TEXTS = {"nxd_text": (NXD_TEXT, ((4, 32), (32, 16))), "async_iota_text": (ASYNC_IOTA_TEXT, ((2, 8),))}


def generate(outdir, names=PROGRAMS, timeout=600):
    """Write <name>.hlo and <name>.npz for NAMES into OUTDIR (one subprocess)."""
    env = dict(os.environ)
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=%d" % NRANKS
    env["JAX_PLATFORMS"] = "cpu"
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    subprocess.run([sys.executable, "-m", "tests.support.spmd", outdir] + list(names), env=env, check=True,
                   timeout=timeout, cwd=root)


def load(outdir, name):
    """(HLO text, [per-rank input lists], [per-rank output lists])."""
    with open(os.path.join(outdir, name + ".hlo")) as f:
        text = f.read()
    z = np.load(os.path.join(outdir, name + ".npz"))
    ni = sum(1 for k in z.files if k.startswith("input"))
    no = sum(1 for k in z.files if k.startswith("output"))
    ins = [[z["input%d" % i][d] for i in range(ni)] for d in range(NRANKS)]
    outs = [[z["output%d" % i][d] for i in range(no)] for d in range(NRANKS)]
    return text, ins, outs


# -- the programs (run inside the subprocess) -------------------------------------------

def _rms(x, g):
    import jax.numpy as jnp
    return x * jnp.reciprocal(jnp.sqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-5)) * g


def _attn(h, wq, wk, wv, hd):
    import jax
    import jax.numpy as jnp
    q, k, v = h @ wq, h @ wk, h @ wv
    s = (q @ k.T) * (1.0 / np.sqrt(hd))
    n = s.shape[0]
    mask = jnp.tril(jnp.ones((n, n), bool))
    s = jnp.where(mask, s, -1e9)
    return jax.nn.softmax(s, axis=-1) @ v


def _program(name, rng):
    """(fn, mesh axis, in_specs, out_specs, global args)."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import PartitionSpec as P

    f32 = np.float32
    H, F, hd = 64, 128, 8

    def w(*s):
        return (rng.standard_normal(s) / np.sqrt(s[0])).astype(f32)

    if name in ("tp_decoder", "sp_decoder"):
        S = 8 if name == "tp_decoder" else 16
        x = rng.standard_normal((S, H)).astype(f32)
        g1, g2 = (1 + 0.1 * rng.standard_normal(H)).astype(f32), (1 + 0.1 * rng.standard_normal(H)).astype(f32)
        args = (x, g1, g2, w(H, H), w(H, H), w(H, H), w(H, H), w(H, F), w(H, F), w(F, H))
        col, row, rep = P(None, "tp"), P("tp", None), P()
        if name == "tp_decoder":
            def fn(x, g1, g2, wq, wk, wv, wo, wg, wu, wd):
                a = _attn(_rms(x, g1), wq, wk, wv, hd) @ wo
                x1 = x + jax.lax.psum(a, "tp")
                h = _rms(x1, g2)
                m = (jax.nn.silu(h @ wg) * (h @ wu)) @ wd
                return x1 + jax.lax.psum(m, "tp")
            return fn, "tp", (rep, rep, rep, col, col, col, row, col, col, row), rep, args

        def fn(x, g1, g2, wq, wk, wv, wo, wg, wu, wd):
            h = jax.lax.all_gather(_rms(x, g1), "tp", axis=0, tiled=True)
            a = _attn(h, wq, wk, wv, hd) @ wo
            x1 = x + jax.lax.psum_scatter(a, "tp", scatter_dimension=0, tiled=True)
            h = jax.lax.all_gather(_rms(x1, g2), "tp", axis=0, tiled=True)
            m = (jax.nn.silu(h @ wg) * (h @ wu)) @ wd
            return x1 + jax.lax.psum_scatter(m, "tp", scatter_dimension=0, tiled=True)
        return fn, "tp", (row, rep, rep, col, col, col, row, col, col, row), row, args

    if name == "dp_train":
        B, D, O = 4 * NRANKS, 16, 8
        args = (w(D, O), np.zeros(O, f32), rng.standard_normal((B, D)).astype(f32),
                rng.standard_normal((B, O)).astype(f32))

        def loss(wt, b, x, y):
            return jnp.mean((jnp.tanh(x @ wt + b) - y) ** 2)

        def fn(wt, b, x, y):
            lv, (gw, gb) = jax.value_and_grad(loss, argnums=(0, 1))(wt, b, x, y)
            gw, gb = jax.lax.pmean(gw, "dp"), jax.lax.pmean(gb, "dp")
            return wt - 0.1 * gw, b - 0.1 * gb, jax.lax.pmean(lv, "dp")
        return fn, "dp", (P(), P(), P("dp"), P("dp")), (P(), P(), P()), args

    if name == "permute_ring":
        x = rng.standard_normal((4 * NRANKS, 16)).astype(f32)
        fwd = [(i, (i + 1) % NRANKS) for i in range(NRANKS)]
        bwd = [(i, (i - 1) % NRANKS) for i in range(NRANKS)]

        def fn(x):
            y = jax.lax.ppermute(x, "r", fwd)
            z = jax.lax.ppermute(y * 2.0 + x, "r", bwd)
            return z - x
        return fn, "r", (P("r"),), P("r"), (x,)

    if name == "moe_all_to_all":
        T, D, E = 8, 16, NRANKS          # tokens per rank, model dim, experts (one per rank)
        x = rng.standard_normal((T * NRANKS, D)).astype(f32)
        we = (rng.standard_normal((E, D, D)) / 4).astype(f32)

        def fn(x, we):
            # dispatch: token t of this rank goes to expert t % E (a fixed routing table)
            buf = x.reshape(E, T // E, D)                 # [expert, slot, d]
            got = jax.lax.all_to_all(buf, "ep", 0, 0, tiled=True)   # [source rank, slot, d] for my expert
            y = jnp.tanh(got @ we[0])
            back = jax.lax.all_to_all(y, "ep", 0, 0, tiled=True)
            return back.reshape(T, D) + x
        return fn, "ep", (P("ep"), P("ep")), P("ep"), (x, we)
    raise KeyError(name)


def _per_device(arr, ndev):
    shards = sorted(arr.addressable_shards, key=lambda s: s.device.id)
    assert len(shards) == ndev
    return np.stack([np.asarray(s.data) for s in shards])


def _run_jax(name, outdir):
    import jax
    from jax.sharding import Mesh, NamedSharding

    rng = np.random.default_rng(sum(map(ord, name)))
    fn, axis, in_specs, out_specs, args = _program(name, rng)
    devs = sorted(jax.devices(), key=lambda d: d.id)[:NRANKS]
    mesh = Mesh(np.array(devs), (axis,))
    dump = os.path.join(outdir, "dump_" + name)
    jitted = jax.jit(jax.shard_map(fn, mesh=mesh, in_specs=in_specs, out_specs=out_specs))
    placed = [jax.device_put(a, NamedSharding(mesh, s)) for a, s in zip(args, in_specs)]
    os.makedirs(dump, exist_ok=True)
    from jax._src import config as _cfg  # noqa: F401  (dump flags are per compile through XLA_FLAGS)
    out = jitted(*placed)
    outs = jax.tree_util.tree_leaves(out)
    z = {}
    for i, a in enumerate(placed):
        z["input%d" % i] = _per_device(a, NRANKS)
    for i, o in enumerate(outs):
        z["output%d" % i] = _per_device(o, NRANKS)
    np.savez(os.path.join(outdir, name + ".npz"), **z)
    txt = jitted.lower(*placed).compile().as_text()  # noqa: F841 (forces the dump when cached)
    files = sorted(glob.glob(os.path.join(os.environ["NCC_SPMD_DUMP"], "*jit_fn*after_spmd-partitioning*.txt")))
    if not files:
        raise RuntimeError("XLA wrote no after_spmd-partitioning dump for %s" % name)
    with open(files[-1]) as f:
        text = f.read()
    for p in files:
        os.remove(p)
    with open(os.path.join(outdir, name + ".hlo"), "w") as f:
        f.write(text)


def _run_text(outdir, name):
    """A hand-written per-rank text on 8 XLA:CPU replicas (cross-replica collectives, replica-id)."""
    import jax
    from jax._src import xla_bridge
    from jax._src.lib import _jax, xla_client
    from jax._src.lib import hlo as _hlo

    rng = np.random.default_rng(7)
    text, shapes = TEXTS[name]
    ins = [rng.standard_normal((NRANKS,) + s).astype(np.float32) for s in shapes]
    pb = _hlo.hlo_module_from_text(text).as_serialized_hlo_module_proto()
    client = xla_bridge.get_backend("cpu")
    devs = sorted(client.devices(), key=lambda d: d.id)[:NRANKS]
    opts = xla_client.CompileOptions()
    opts.num_replicas = NRANKS
    opts.num_partitions = 1
    opts.device_assignment = xla_client.DeviceAssignment.create(np.arange(NRANKS).reshape(NRANKS, 1))
    exe = client.compile_and_load(_jax.mlir.hlo_to_stablehlo(pb), xla_client.DeviceList(tuple(devs)), opts)
    from jax.sharding import Mesh, NamedSharding, PartitionSpec
    rep = NamedSharding(Mesh(np.array(devs), ("r",)), PartitionSpec())
    # one array per parameter whose shard on device d is replica d's input (values differ per replica)
    args = [jax.make_array_from_single_device_arrays(a.shape[1:], rep, [jax.device_put(a[d], devs[d])
                                                                        for d in range(NRANKS)])
            for a in ins]
    res = exe.execute_sharded(args).disassemble_into_single_device_arrays()
    z = {"input%d" % i: a for i, a in enumerate(ins)}
    for k, r in enumerate(res):
        by_dev = sorted(r, key=lambda x: list(x.devices())[0].id)
        z["output%d" % k] = np.stack([np.asarray(x) for x in by_dev])
    np.savez(os.path.join(outdir, name + ".npz"), **z)
    with open(os.path.join(outdir, name + ".hlo"), "w") as f:
        f.write(text)


def _main(argv):
    outdir = argv[0]
    for name in argv[1:]:
        if name in TEXTS:
            _run_text(outdir, name)
        else:
            _run_jax(name, outdir)


if __name__ == "__main__":
    _dump = os.path.join(sys.argv[1], "xla_dump")
    os.environ["NCC_SPMD_DUMP"] = _dump
    os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_dump_to=%s --xla_dump_hlo_pass_re=spmd-partitioning" % _dump
    _main(sys.argv[1:])


def modes_inputs(seed=3):
    rng = np.random.default_rng(seed)
    return [[rng.standard_normal((2, 4)).astype(np.float32) * 4, rng.standard_normal(3).astype(np.float32)]
            for _ in range(NRANKS)]


def modes_expected(ins):
    """numpy's per-rank result of MODES_TEXT (2 replicas x 4 partitions, device = replica * 4 + partition):
    (f32 part, bf16 part) of the f32[112] output."""
    import ml_dtypes
    xs = [i[0] for i in ins]
    ys = [i[1] for i in ins]
    out = []
    for d in range(NRANKS):
        r, p = divmod(d, 4)
        two0 = xs[p] + xs[4 + p]                                  # cross-replica: same partition
        two1 = ys[p] + ys[4 + p]
        ag = np.concatenate([xs[k] for k in range(8)])             # replicas {0,1} x every partition
        mx = np.max([np.trunc(xs[k]) for k in range(4 * r, 4 * r + 4)], axis=0)   # replica r, all partitions
        allpos = np.all([xs[k] > 0 for k in range(8)], axis=0).astype(np.float32)
        pair = (0, 1) if p < 2 else (2, 3)
        pos = pair.index(p)
        a2a = np.concatenate([xs[4 * r + q][pos:pos + 1] for q in pair])
        cp = ys[4 * r + (p - 1) % 4]
        grp = [0, 2, 4, 6] if d % 2 == 0 else [1, 3, 5, 7]
        sb = np.sum([xs[k].astype(ml_dtypes.bfloat16).astype(np.float32) for k in grp], axis=0)
        f32 = np.concatenate([two0.reshape(-1), two1, ag.reshape(-1), mx.reshape(-1), allpos.reshape(-1),
                              a2a.reshape(-1), cp]).astype(np.float32)
        ids = np.array([p, r], np.float32)
        out.append((np.concatenate([f32, np.zeros(8, np.float32), ids]), sb.reshape(-1)))
    return out


def split_modes(o):
    """(f32 part with the bf16 slots zeroed, bf16 part) of a MODES_TEXT output."""
    o = np.asarray(o, np.float32).copy()
    sb = o[102:110].copy()
    o[102:110] = 0
    return o, sb
