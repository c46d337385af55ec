"""xla_infergoldens: a thin tool over the interpreter. Run as the pipeline
runs it (the starfish/bin launcher) for the exit-status contract, and in
process for the rest."""
import numpy as np
import pytest

import ml_dtypes

from support import corpus
from support.cli import run_tool
from neuronxcc.hlo import load_module
from neuronxcc.hlo.infergoldens import index_limits, main, random_inputs, read_npz
from neuronxcc.common.tolerances import mismatch


def _write(tmp_path, name, size="small", form="proto"):
    p = corpus.get(name)
    args = p.make_args(0, size)
    pb, text = corpus.lower(p, args)
    path = tmp_path / (name + (".pb" if form == "proto" else ".hlo"))
    if form == "proto":
        path.write_bytes(pb)
    else:
        path.write_text(text)
    return p, args, str(path)


def test_tool_with_given_inputs_matches_xla(tmp_path):
    p, args, model = _write(tmp_path, "mlp_gelu_softmax")
    np.savez(tmp_path / "in.npz", **{"input%d" % i: a for i, a in enumerate(args)})
    r = run_tool("xla_infergoldens", [model, "--inputs", str(tmp_path / "in.npz"), "--output",
                                      str(tmp_path / "g.npz")])
    assert r.returncode == 0, r.stderr
    ins, outs = read_npz(str(tmp_path / "g.npz"), load_module(model))
    for a, b in zip(ins, args):
        np.testing.assert_array_equal(a, b)
    ref = corpus.reference(p, args)
    assert len(outs) == len(ref)
    for a, b in zip(outs, ref):
        assert not mismatch(a, b)


def test_random_inputs_are_seeded_and_valid(tmp_path):
    p, args, model = _write(tmp_path, "gather_scatter", form="text")
    out1, out2, out3 = (str(tmp_path / n) for n in ("a.npz", "b.npz", "c.npz"))
    assert main([model, "--output", out1, "--seed", "3"]) == 0
    assert main([model, "--output", out2, "--seed", "3"]) == 0
    assert main([model, "--output", out3, "--seed", "4"]) == 0
    m = load_module(model)
    a_in, a_out = read_npz(out1, m)
    b_in, b_out = read_npz(out2, m)
    c_in, _ = read_npz(out3, m)
    assert all(np.array_equal(x, y) for x, y in zip(a_in + a_out, b_in + b_out))
    assert not np.array_equal(a_in[0], c_in[0])
    idx = a_in[1]
    assert idx.dtype == np.int32 and idx.min() >= 0 and idx.max() < args[0].shape[0]
    # the goldens are what XLA computes on those inputs
    for a, b in zip(a_out, corpus.reference(p, a_in)):
        assert not mismatch(a, b)


def test_index_limits_follow_dynamic_slices(tmp_path):
    _, args, model = _write(tmp_path, "kv_cache_update")
    m = load_module(model)
    lim = index_limits(m)
    assert 2 in lim and lim[2] <= args[0].shape[0] - args[1].shape[0] + 1
    ins = random_inputs(m, 0)
    assert [a.shape for a in ins] == [a.shape for a in args]
    assert [a.dtype for a in ins] == [a.dtype for a in args]


def test_bf16_and_bool_round_trip(tmp_path):
    _, args, model = _write(tmp_path, "bf16_matmul")
    out = str(tmp_path / "g.npz")
    assert main([model, "--output", out]) == 0
    ins, outs = read_npz(out, load_module(model))
    assert ins[0].dtype == ml_dtypes.bfloat16 and outs[0].dtype == np.float32
    assert outs[1].dtype == ml_dtypes.bfloat16


def test_float8_goldens_round_trip(tmp_path):
    # np.save writes float8_e5m2 with the descriptor '<f1', which np.load refuses: the goldens of
    # every f8 program failed to read back in the compiler's bir_sim check
    import jax
    import jax.numpy as jnp

    def f(x):
        return x.astype(jnp.float8_e5m2), x.astype(jnp.float8_e4m3fn), x.astype(jnp.float8_e5m2).astype(jnp.float32)
    x = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)
    model = tmp_path / "f8.pb"
    model.write_bytes(jax.jit(f).lower(x).compiler_ir("hlo").as_serialized_hlo_module_proto())
    out = str(tmp_path / "g.npz")
    assert main([str(model), "--output", out]) == 0
    ins, outs = read_npz(out, load_module(str(model)))
    assert [o.dtype for o in outs] == [np.dtype(ml_dtypes.float8_e5m2), np.dtype(ml_dtypes.float8_e4m3fn),
                                       np.dtype(np.float32)]
    ref = [np.asarray(o) for o in f(ins[0])]
    for a, b in zip(outs, ref):
        assert not mismatch(a, b)


def test_over_budget_is_skipped(tmp_path):
    _, _, model = _write(tmp_path, "matmul_grad")
    out = tmp_path / "g.npz"
    out.write_bytes(b"stale")
    r = run_tool("xla_infergoldens", [model, "--output", str(out), "--size-budget", "1000"])
    assert r.returncode == 3, r.stderr           # EXIT_SKIPPED: no goldens, and not a success
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "skipped" in lines[0] and "size budget" in lines[0] and str(out) in lines[0], lines
    assert not out.exists()


@pytest.mark.parametrize("content, code", [
    (b"", "NCC_EHLO001"),
    (b"\x08\x96\x01garbage\xff\xff", "NCC_EHLO001"),
    (b"HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT r = f32[2] add(p, q)\n}\n", "NCC_EVRF002"),
    (b"HloModule m\nENTRY e {\n  p = f32[4000000000,4000000000] parameter(0)\n"
     b"  ROOT r = f32[4000000000,4000000000] negate(p)\n}\n", "NCC_EOOM001"),
])
def test_bad_model_one_line_exit_70(tmp_path, content, code):
    model = tmp_path / "bad"
    model.write_bytes(content)
    # a budget that lets every program through, so a huge parameter reaches the input generator
    r = run_tool("xla_infergoldens", [str(model), "--output", str(tmp_path / "g.npz"), "--size-budget", "1" + "0" * 30])
    assert r.returncode == 70
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("[" + code + "]"), r.stderr
    assert "Traceback" not in r.stderr + r.stdout
    assert not (tmp_path / "g.npz").exists()


def test_bad_inputs_file(tmp_path):
    _, args, model = _write(tmp_path, "layernorm")
    np.savez(tmp_path / "in.npz", input0=args[0])
    r = run_tool("xla_infergoldens", [model, "--inputs", str(tmp_path / "in.npz"), "--output",
                                      str(tmp_path / "g.npz")])
    assert r.returncode == 70 and "input1" in r.stderr and "Traceback" not in r.stderr
    np.savez(tmp_path / "in2.npz", input0=args[0][:1], input1=args[1], input2=args[2])
    r = run_tool("xla_infergoldens", [model, "--inputs", str(tmp_path / "in2.npz"), "--output",
                                      str(tmp_path / "g.npz")])
    assert r.returncode == 70 and r.stderr.startswith("[NCC_EVRF002]")


def test_given_inputs_are_stored_in_the_parameter_dtypes(tmp_path):
    model = tmp_path / "neg.hlo"
    model.write_text("HloModule neg\n\nENTRY e {\n  p = f32[4] parameter(0)\n  ROOT n = f32[4] negate(p)\n}\n")
    np.savez(tmp_path / "in.npz", input0=np.arange(4, dtype=np.int64))
    out = tmp_path / "g.npz"
    assert main([str(model), "--inputs", str(tmp_path / "in.npz"), "--output", str(out)]) == 0
    with np.load(out) as z:
        assert z["input0"].dtype == np.float32 and z["output0"].dtype == np.float32
        np.testing.assert_array_equal(z["output0"], -z["input0"])


def test_missing_output_flag_and_help(tmp_path):
    r = run_tool("xla_infergoldens", ["model.pb"])
    assert r.returncode == 70 and "--output" in r.stderr and "Traceback" not in r.stderr
    r = run_tool("xla_infergoldens", ["--help"])
    assert r.returncode == 0 and "--size-budget" in r.stdout


def test_scalar_outputs_stay_scalars(tmp_path):
    model = tmp_path / "scalar.hlo"
    model.write_text("HloModule scalar\n\nENTRY e {\n  p = f32[] parameter(0)\n"
                     "  n = f32[] negate(p)\n  b = s32[] bitcast-convert(n)\n  ROOT t = (f32[], s32[]) tuple(n, b)\n}\n")
    np.savez(tmp_path / "in.npz", input0=np.float32(1.5))
    out = tmp_path / "g.npz"
    assert main([str(model), "--inputs", str(tmp_path / "in.npz"), "--output", str(out)]) == 0
    with np.load(out) as z:
        assert z["input0"].shape == () and z["output0"].shape == () and z["output1"].shape == ()
        assert z["output0"] == -1.5 and z["output1"] == np.float32(-1.5).view(np.int32)


_COUNTING_LOOP = """HloModule counting_loop

cond {
  s = s32[] parameter(0)
  limit = s32[] constant(%d)
  ROOT c = pred[] compare(s, limit), direction=NE
}

body {
  s1 = s32[] parameter(0)
  one = s32[] constant(1)
  ROOT a = s32[] add(s1, one)
}

ENTRY e {
  p = s32[] parameter(0)
  ROOT w = s32[] while(p), condition=cond, body=body, metadata={source_file="model.py" source_line=7}
}
"""


def test_while_trip_cap_stops_a_loop_that_never_ends(tmp_path, capsys):
    # counts up from the input to -1: never ends from input 0 (s32 wraps after 2^32 trips)
    model = tmp_path / "loop.hlo"
    model.write_text(_COUNTING_LOOP % -1)
    np.savez(tmp_path / "in.npz", input0=np.int32(0))
    out = tmp_path / "g.npz"
    assert main([str(model), "--inputs", str(tmp_path / "in.npz"), "--output", str(out),
                 "--max-while-trips", "300"]) == 70
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("[NCC_EVRF020] while loop w (model.py:7)"), err
    assert "300 trips" in err[0] and "--max-while-trips" in err[0]
    assert not out.exists()


def test_while_trip_cap_counts_trips_exactly(tmp_path, capsys):
    model = tmp_path / "loop.hlo"
    model.write_text(_COUNTING_LOOP % 40)
    np.savez(tmp_path / "in.npz", input0=np.int32(0))
    out = tmp_path / "g.npz"
    args = [str(model), "--inputs", str(tmp_path / "in.npz"), "--output", str(out)]
    assert main(args + ["--max-while-trips", "39"]) == 70 and not out.exists()
    assert main(args + ["--max-while-trips", "40"]) == 0
    (result,) = read_npz(str(out), load_module(str(model)))[1]
    assert result.shape == () and result == 40


def test_spreads_measure_the_goldens_own_sensitivity(tmp_path):
    # spread{i}: float32, the output's shape, float outputs only (none for the s32 one); a
    # well-conditioned op (negate) moves by the input perturbation only: a few ulp, not 0
    model = tmp_path / "mix.hlo"
    model.write_text("HloModule mix\n\nENTRY e {\n  p = f32[64] parameter(0)\n  q = bf16[8] parameter(1)\n"
                     "  n = f32[64] negate(p)\n  b = s32[64] bitcast-convert(n)\n  c = bf16[8] negate(q)\n"
                     "  ROOT t = (f32[64], s32[64], bf16[8]) tuple(n, b, c)\n}\n")
    out = tmp_path / "g.npz"
    assert main([str(model), "--output", str(out), "--seed", "1"]) == 0
    with np.load(out) as z:
        assert "spread0" in z.files and "spread1" not in z.files and "spread2" in z.files
        s0, o0 = z["spread0"], z["output0"]
        assert s0.dtype == np.float32 and s0.shape == o0.shape
        assert 0 < float(s0.max()) and np.all(s0 <= 16 * np.finfo(np.float32).eps * np.abs(o0) + 1e-30)
        assert z["spread2"].dtype == np.float32 and z["spread2"].shape == (8,)
    ins, outs = read_npz(str(out), load_module(str(model)))
    assert len(outs) == 3 and outs[2].dtype == ml_dtypes.bfloat16


def test_spread_is_large_for_a_chaotic_recurrence(tmp_path):
    import jax
    import jax.numpy as jnp

    def rnn(xs, w):
        return jax.lax.scan(lambda h, x: (jnp.tanh(h @ w + x), None), jnp.zeros(32, xs.dtype), xs)[0]
    rng = np.random.default_rng(0)
    args = (rng.standard_normal((60, 32)).astype(np.float32), rng.standard_normal((32, 32)).astype(np.float32))
    path = tmp_path / "rnn.pb"
    path.write_bytes(jax.jit(rnn).lower(*args).compiler_ir("hlo").as_serialized_hlo_module_proto())
    out = tmp_path / "g.npz"
    assert main([str(path), "--output", str(out)]) == 0
    with np.load(out) as z:
        assert z["spread0"].shape == (32,) and float(z["spread0"].max()) > 0.1


def test_dot_inputs_scaled_so_a_deep_stack_stays_in_range():
    """A 6-deep chain of 256-wide matmuls on N(0,1) inputs grows by ~256^3 (the golden check on
    such outputs proves little); inputs feeding a dot are drawn with variance 1/K instead."""
    import jax
    from neuronxcc.hlo import module_from_proto_bytes
    from neuronxcc.hlo.infergoldens import dot_fan_in

    def f(x, *ws):
        for w in ws:
            x = jax.numpy.tanh(x @ w) * 2.0 + x @ w
        return x
    specs = [jax.ShapeDtypeStruct((8, 256), np.float32)] + [jax.ShapeDtypeStruct((256, 256), np.float32)] * 6
    m = module_from_proto_bytes(jax.jit(f).lower(*specs).compiler_ir("hlo").as_serialized_hlo_module_proto())
    assert dot_fan_in(m) == {k: 256 for k in range(7)}
    ins = random_inputs(m, seed=3)
    assert all(abs(float(np.std(a)) * 16.0 - 1.0) < 0.1 for a in ins)     # std 1/sqrt(256)
    out = np.asarray(jax.jit(f)(*ins))
    assert np.all(np.isfinite(out)) and 0.05 < float(np.max(np.abs(out))) < 100.0


@pytest.mark.parametrize("name", ["loops", "sort", "layernorm"])
def test_goldens_and_spreads_equal_two_separate_evaluations(tmp_path, name):
    # the tool runs the goldens and the perturbed run on one evaluator (plans built once); what it
    # writes is what two fresh evaluations give
    from neuronxcc.hlo.infergoldens import output_spreads
    from neuronxcc.hlo.interpreter import evaluate

    _, _, model = _write(tmp_path, name)
    out = tmp_path / "g.npz"
    assert main([model, "--output", str(out), "--seed", "3"]) == 0
    module = load_module(model)
    inputs = random_inputs(module, 3)
    want = evaluate(module, inputs)
    spreads = output_spreads(module, inputs, want, 3)
    assert spreads
    with np.load(out) as z:
        assert sorted(k for k in z.files if k.startswith("spread")) == sorted("spread%d" % i for i in spreads)
        for i, s in spreads.items():
            np.testing.assert_array_equal(z["spread%d" % i], s)
    ins, outs = read_npz(str(out), module)
    assert len(outs) == len(want)
    for a, b in zip(outs, want):
        np.testing.assert_array_equal(a, b)


_FLOAT_LOOP = """HloModule float_loop

cond {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  limit = s32[] constant(25)
  ROOT c = pred[] compare(i, limit), direction=LT
}

body {
  s1 = (s32[], f32[4]) parameter(0)
  i1 = s32[] get-tuple-element(s1), index=0
  x1 = f32[4] get-tuple-element(s1), index=1
  one = s32[] constant(1)
  i2 = s32[] add(i1, one)
  x2 = f32[4] add(x1, x1)
  ROOT t = (s32[], f32[4]) tuple(i2, x2)
}

ENTRY e {
  x = f32[4] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[4]) tuple(zero, x)
  w = (s32[], f32[4]) while(init), condition=cond, body=body
  ROOT r = f32[4] get-tuple-element(w), index=1
}
"""


def test_perturbed_run_has_its_own_while_trip_budget(tmp_path):
    # 25 trips per run: a cap of 25 lets both runs finish, so the spread is there
    model = tmp_path / "floop.hlo"
    model.write_text(_FLOAT_LOOP)
    np.savez(tmp_path / "in.npz", input0=np.full(4, 0.999, np.float32))
    out = tmp_path / "g.npz"
    args = [str(model), "--inputs", str(tmp_path / "in.npz"), "--output", str(out)]
    assert main(args + ["--max-while-trips", "24"]) == 70 and not out.exists()
    assert main(args + ["--max-while-trips", "25"]) == 0
    with np.load(out) as z:
        assert "spread0" in z.files and float(z["spread0"].max()) > 0


_FORK_PROBE = """
import json, sys
import neuronxcc.hlo.infergoldens as g
made = []
class Counted(g._ForkedRun):
    def __init__(self, *a):
        made.append(1)
        super().__init__(*a)
g._ForkedRun = Counted
if sys.argv[1] == "fail":
    def _rerun(ev):
        def run(inputs):
            raise RuntimeError("perturbed run refused")
        return run
    g._rerun = _rerun
rc = g.main(sys.argv[2:])
print(json.dumps({"rc": rc, "forked": len(made)}))
"""


def _fork_probe(mode, argv):
    import json
    import subprocess
    import sys

    from support.cli import _env

    env = dict(_env(), OPENBLAS_NUM_THREADS="1")     # one thread, as in a compile's forked tool
    r = subprocess.run([sys.executable, "-c", _FORK_PROBE, mode] + argv, capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1]), r.stdout


@pytest.mark.parametrize("name", ["layernorm", "loops"])
def test_the_perturbed_run_beside_the_goldens_run_writes_what_the_serial_one_does(tmp_path, name):
    """On more than one core the perturbed run (the spreads) runs in a forked process beside the
    goldens run; the file is byte for byte what --serial (both runs in this process) writes."""
    import os
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one core: the tool runs serially")
    _, _, model = _write(tmp_path, name)
    par, _ = _fork_probe("ok", [model, "--output", str(tmp_path / "par.npz"), "--seed", "5"])
    ser, _ = _fork_probe("ok", [model, "--output", str(tmp_path / "ser.npz"), "--seed", "5", "--serial"])
    assert par == {"rc": 0, "forked": 1} and ser == {"rc": 0, "forked": 0}
    with np.load(tmp_path / "par.npz") as a, np.load(tmp_path / "ser.npz") as b:
        assert sorted(a.files) == sorted(b.files) and any(k.startswith("spread") for k in a.files)
        for k in a.files:
            assert a[k].dtype == b[k].dtype and a[k].tobytes() == b[k].tobytes(), k
    # a perturbed run that fails in the forked process: the goldens stand, without spreads, said so
    res, out = _fork_probe("fail", [model, "--output", str(tmp_path / "f.npz"), "--seed", "5"])
    assert res == {"rc": 0, "forked": 1}
    assert "no spreads: the perturbed run failed: RuntimeError: perturbed run refused" in out
    with np.load(tmp_path / "f.npz") as a, np.load(tmp_path / "ser.npz") as b:
        assert sorted(a.files) == sorted(k for k in b.files if not k.startswith("spread"))
        for k in a.files:
            assert a[k].tobytes() == b[k].tobytes(), k


_ORPHAN_PROBE = """
import faulthandler, os, sys, time
import neuronxcc.hlo.infergoldens as g
faulthandler.enable()
probe = g._ForkedRun(lambda a: faulthandler.is_enabled(), None)
print("faulthandler in the child:", probe.result(), flush=True)
beside = g._ForkedRun(lambda a: time.sleep(600), None)
print("child", beside.pid, flush=True)
os._exit(0)                          # the parent ends without cancel(): no cleanup runs
"""


def _gone(pid):
    """True when pid has exited (a zombie waiting for a reaper counts)."""
    import os
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def test_the_forked_perturbed_run_is_a_quiet_helper_that_ends_with_its_parent():
    """The child has faulthandler off (a crash there is a failed perturbed run, not a second
    traceback), and a child whose parent died (killed, or ending without cancel) exits instead of
    running on as an orphan."""
    import subprocess
    import sys
    import time

    from support.cli import _env

    r = subprocess.run([sys.executable, "-c", _ORPHAN_PROBE], capture_output=True, text=True, env=_env(),
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "faulthandler in the child: (False, None)" in r.stdout
    pid = int(r.stdout.split("child ")[1].split()[0])
    for _ in range(600):                 # a liveness wait (up to a minute), not a timing claim
        if _gone(pid):
            break
        time.sleep(0.1)
    else:
        import os
        import signal
        os.kill(pid, signal.SIGKILL)
        raise AssertionError("the forked run outlived its parent")
