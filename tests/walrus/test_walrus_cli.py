"""walrus_driver, coloring_allocator_with_loop, full_unroll and walrus_bugpoint_driver
as programs: argv in, files out, one [NCC_...] line and exit 70 on errors."""
import json

import numpy as np
import pytest

from neuronxcc.starfish import birpy as B
from neuronxcc.starfish.birsim import run_module
from neuronxcc.walrus.pass_names import PASS_NAMES
from support.cli import run_tool
from support.walrus_checks import check_no_clobber, raw_equal
from support.walrus_programs import inputs_for, random_program

PIPELINE = ("lsa,coloring,unroll,lower_ac,pre_sched,partitioner,bir_splitter,coloring_allocator,"
            "dma_optimization,anti_dependency_analyzer,vn_splitter,post_sched,tensorcopy_accel,"
            "dep_reduction,print_metrics,birverifier,bir_sim")


def _write(m, path):
    B.save(m, str(path))
    return str(path)


def _goldens(m, path, seed=0):
    x = inputs_for(m, seed)
    outs = run_module(B.from_json(B.to_json(m)), x)
    d = {"input%d" % i: a for i, a in enumerate(x)}
    d.update({"output%d" % i: a for i, a in enumerate(outs)})
    np.savez(str(path), **d)
    return str(path)


def test_list_passes_names_every_pass_and_noops():
    r = run_tool("walrus_driver", ["--list-passes"])
    assert r.returncode == 0, r.stderr
    for name in PASS_NAMES:
        assert name in r.stdout
    lines = {l.split()[0]: l for l in r.stdout.splitlines()[1:]}
    for real in ("coloring_allocator", "linear_scan_allocator", "anti_dependency_analyzer", "dep_reduction",
                 "pre_sched", "post_sched", "bir_sim", "birverifier", "print_metrics", "unroll", "dma_optimization"):
        assert lines[real].rstrip().endswith("[implemented]")
    assert "no-op:" in lines["partitioner"]


def test_unknown_pass_is_one_line_exit_70(tmp_path):
    m = random_program(0)
    r = run_tool("walrus_driver", ["--input", _write(m, tmp_path / "b.json"), "--output", str(tmp_path / "o.json"),
                                   "--walrus-passes", "lsa,no_such_pass"])
    assert r.returncode == 70
    assert r.stderr.strip().splitlines() == [r.stderr.strip()]
    assert r.stderr.startswith("[NCC_EARG010]") and "no_such_pass" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "o.json").exists()


def test_full_pipeline_with_goldens_and_metrics(tmp_path):
    m = random_program(4)
    inp = _write(m, tmp_path / "bir.json")
    g = _goldens(m, tmp_path / "goldens.npz")
    r = run_tool("walrus_driver", ["--input", inp, "--output", str(tmp_path / "walrus.bir.json"),
                                   "--walrus-passes", PIPELINE, "--target", "trn1", "--goldens", g,
                                   "--metrics", str(tmp_path / "metrics.json")], cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    out = B.load(str(tmp_path / "walrus.bir.json"))
    assert all(ml.allocated for ml in out.memlocs.values())
    assert check_no_clobber(out) == []
    met = json.loads((tmp_path / "metrics.json").read_text())
    # this random program never writes y (birsim leaves it NaN): matching it proves nothing, and
    # the check says so instead of "passed"
    assert met["bir_sim"].startswith("weak: output0 'y' has 16384 non-finite of 16384 values"), met["bir_sim"]
    assert met["instructions"] == len(out.instructions())
    assert met["estimated_time_s"] > 0 and met["sbuf_peak_bytes_per_partition"] > 0
    assert set(met["instructions_per_engine"]) <= {"PE", "ACT", "DVE", "POOL", "SP"}
    log = (tmp_path / "walrus_driver.log").read_text()
    assert "walrus pass coloring_allocator" in log and "outputs match the goldens" in log


def test_bir_sim_catches_an_injected_numerical_bug(tmp_path):
    m = random_program(2)
    g = _goldens(m, tmp_path / "goldens.npz")
    # the bug: one tensor_scalar constant is off
    ins = next(i for i in m.instructions() if i.opcode in ("tensor_scalar", "activation"))
    if ins.opcode == "tensor_scalar":
        ins.attrs["operand1"] = float(ins.attrs.get("operand1", 0.0)) + 0.25
    else:
        ins.attrs["bias"] = float(ins.attrs.get("bias", 0.0)) + 0.25
    inp = _write(m, tmp_path / "bir.json")
    r = run_tool("walrus_driver", ["--input", inp, "--output", str(tmp_path / "o.json"),
                                   "--walrus-passes", "lsa,coloring_allocator,anti_dependency_analyzer,bir_sim",
                                   "--goldens", g])
    assert r.returncode == 70
    line = r.stderr.strip()
    assert "\n" not in line and line.startswith("[INTERNAL_ERROR] [NCC_IBSM001]")
    assert "Failed in walrus pipeline (step: bir_sim)" in line and "worst |got - want|" in line


def test_bir_sim_skips_without_goldens_and_over_budget(tmp_path):
    m = random_program(1)
    inp = _write(m, tmp_path / "bir.json")
    g = _goldens(m, tmp_path / "goldens.npz")
    r = run_tool("walrus_driver", ["--input", inp, "--output", str(tmp_path / "o.json"), "--walrus-passes", "bir_sim",
                                   "--metrics", str(tmp_path / "m.json")])
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "m.json").read_text())["bir_sim"].startswith("skipped: no goldens")
    r = run_tool("walrus_driver", ["--input", inp, "--output", str(tmp_path / "o.json"), "--walrus-passes", "bir_sim",
                                   "--goldens", g, "--sim-budget-instructions", "10", "--metrics", str(tmp_path / "m.json")])
    assert r.returncode == 0, r.stderr
    assert "over budget" not in r.stderr
    assert "executed instructions > budget 10" in json.loads((tmp_path / "m.json").read_text())["bir_sim"]


def test_coloring_allocator_with_loop_and_full_unroll_tools(tmp_path):
    m = random_program(3)
    inp = _write(m, tmp_path / "bir.json")
    r = run_tool("coloring_allocator_with_loop", [inp, "--output", str(tmp_path / "alloc.json")])
    assert r.returncode == 0, r.stderr
    assert "coloring SBUF" in r.stdout and "peak" in r.stdout
    a = B.load(str(tmp_path / "alloc.json"))
    assert all(ml.allocated for ml in a.memlocs.values()) and check_no_clobber(a) == []
    assert any(n.kind == "loop" for n in a.walk())
    r = run_tool("full_unroll", [inp, "--output", str(tmp_path / "flat.json")])
    assert r.returncode == 0, r.stderr
    f = B.load(str(tmp_path / "flat.json"))
    assert not any(n.kind == "loop" for n in f.walk())
    x = inputs_for(m, 0)
    assert all(raw_equal(u, v) for u, v in zip(run_module(m, x), run_module(f, x)))
    r = run_tool("full_unroll", [str(tmp_path / "missing.json"), "--output", str(tmp_path / "x.json")])
    assert r.returncode == 70 and r.stderr.startswith("[NCC_E") and "missing.json" in r.stderr


def _module_with_verifier_error(n_ops=40):
    m = random_program(5, nbuf=5)
    # injected: a matmul on the vector engine (only the PE may issue matmul)
    loop = next(n for n in m.body if n.kind == "loop")
    body = loop.body[0].body if loop.body and loop.body[0].kind == "loop" else loop.body
    body.insert(len(body) // 2, B.Instruction("matmul", "DVE", [B.AccessPattern("ps", "float32", 0, [[1, 16]], 0, 128)],
                                              [B.AccessPattern("ident", "float32", 0, [[1, 128]], 0, 128),
                                               B.AccessPattern("b1", "float32", 0, [[1, 16]], 0, 128)],
                                              {"psum_zero": True}))
    m.renumber()
    return m


def test_bugpoint_shrinks_a_verifier_error_to_a_handful(tmp_path):
    m = _module_with_verifier_error()
    n0 = len(m.instructions())
    inp = _write(m, tmp_path / "bad.json")
    with pytest.raises(Exception):
        B.verify(B.load(inp), "trn1")
    r = run_tool("walrus_bugpoint_driver", [inp, "--predicate", "verifier", "--output", str(tmp_path / "small.json"), "-q"])
    assert r.returncode == 0, r.stderr
    assert "You can reproduce the problem with: walrus_driver --input" in r.stdout
    small = B.load(str(tmp_path / "small.json"))
    assert len(small.instructions()) <= 3 < n0
    assert [i.opcode + "@" + i.engine for i in small.instructions()] == ["matmul@DVE"]
    assert not any(n.kind == "loop" for n in small.walk())
    with pytest.raises(Exception, match="matmul"):
        B.verify(small, "trn1")


def test_bugpoint_command_predicate(tmp_path):
    m = random_program(6)
    inp = _write(m, tmp_path / "p.json")
    # "the problem": the module still has an activation on ACT (exit 1 when present)
    cmd = ("python3 -c \"import json,sys; d=open(sys.argv[1]).read(); "
           "sys.exit(1 if '\\\"activation\\\"' in d else 0)\" {}")
    r = run_tool("walrus_bugpoint_driver", [inp, "--predicate", "command", cmd, "--output", str(tmp_path / "r.json"), "-q"])
    if '"activation"' not in open(inp).read():
        assert r.returncode == 70 and "does not hold" in r.stderr
        return
    assert r.returncode == 0, r.stderr
    red = B.load(str(tmp_path / "r.json"))
    assert [i.opcode for i in red.instructions()] == ["activation"]
    assert "You can reproduce the problem with: python3 -c" in r.stdout


def test_bugpoint_birsim_mismatch_check(tmp_path):
    m = random_program(0)
    inp = _write(m, tmp_path / "ok.json")
    r = run_tool("walrus_bugpoint_driver", [inp, "--predicate", "birsim-mismatch", "--check"])
    assert r.returncode == 0 and "does not hold" in r.stdout, r.stdout + r.stderr


def test_verifier_between_passes_names_the_step():
    from neuronxcc import errors
    from neuronxcc.hwm import get_target
    from neuronxcc.walrus.registry import PassContext, run_passes

    def ctx(verify):
        return PassContext(get_target("trn1"), options={"verify_between_passes": verify, "unroll_max_trip": 8,
                                                        "unroll_max_instructions": 1000})
    # the verifier itself reports the broken rule right after the first pass that changed the module
    with pytest.raises(errors.BirVerifyError) as ei:
        run_passes(_module_with_verifier_error(), ["lsa", "unroll", "coloring_allocator"], ctx(True))
    msg = str(ei.value)
    assert msg.startswith("Failed in walrus pipeline (step: unroll): ") and "matmul" in msg and "DVE" in msg, msg
    # without the option nothing checks between passes: the same pipeline runs through
    run_passes(_module_with_verifier_error(), ["lsa", "unroll", "coloring_allocator"], ctx(False))


def test_unknown_option_and_undeclared_analysis_are_refused():
    from neuronxcc import errors
    from neuronxcc.hwm import get_target
    from neuronxcc.walrus.registry import PassContext, run_passes
    with pytest.raises(errors.InvalidArgumentError) as ei:
        PassContext(get_target("trn1"), options={"unroll_max_trips": 8})
    assert ei.value.code == "NCC_EARG011" and "unroll_max_trips" in str(ei.value)
    ctx = PassContext(get_target("trn1"))
    ctx.current = "unroll"            # its row declares no analyses
    with pytest.raises(errors.InternalCompilerError, match="unroll reads analysis 'lsa'"):
        ctx.analysis("lsa", lambda: None)
    ctx.current = None
    run_passes(random_program(1), ["lsa", "print_metrics"], ctx)
    assert ctx.analysis_runs == {"lsa": 1, "deps": 1}


def test_default_pipeline_is_the_table_order_with_gates():
    from neuronxcc.walrus import pass_names as PN
    order = list(PN.PASS_NAMES)
    for opt in (0, 1, 2, 3):
        p = PN.default_pipeline(opt)
        assert p == sorted(p, key=order.index)
        assert all(PN.SPECS[n].min_opt <= opt for n in p)
    assert "coloring_allocator" in PN.default_pipeline(2) and "linear_scan_allocator" in PN.default_pipeline(1)
    assert PN.default_pipeline(2, {PN.LOOP_LSA, PN.SHIFT_LEFT})[0] == "experimental_loop_lsa"
    assert "bir_sim" not in PN.default_pipeline(2, {PN.NO_BIR_SIM})
    assert "birverifier" not in PN.default_pipeline(2, verifier=False)


def test_registry_is_filled_from_the_pass_lists_not_by_importing():
    """Every table name has exactly one pass, from passes.PASSES / NOOPS; a pass module imports the
    contract, never the registry (so registry -> passes has no way back)."""
    import ast
    import sys
    from neuronxcc.walrus import passes, registry
    names = [c.name for c in passes.PASSES] + list(passes.NOOPS)
    assert sorted(names) == sorted(PASS_NAMES)
    assert [n for n, _ in registry.all_passes()] == list(PASS_NAMES)
    for f in {sys.modules[c.__module__].__file__ for c in passes.PASSES} | {passes.__file__}:
        tree = ast.parse(open(f).read())
        mods = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert "neuronxcc.walrus.registry" not in mods, f
        assert not any(m.startswith("neuronxcc.walrus.passes.") for m in mods), f


def test_whether_bir_sim_runs_is_one_function():
    """pass_names.bir_sim_skip decides for the driver (golden jobs, WalrusDriver, the USER line)
    and for the bir_sim pass; no other module tests the pass list for bir_sim itself."""
    import os
    import re
    from neuronxcc.walrus import pass_names as PN
    assert PN.bir_sim_skip(["lsa"]) == "disabled"
    assert PN.bir_sim_skip(["bir_sim"], goldens=False) == "no goldens"
    assert PN.bir_sim_skip(["bir_sim"], executed=10 ** 9).startswith("1000000000 executed instructions > budget")
    assert PN.bir_sim_skip(["bir_sim"], io_bytes=5, options={"sim_budget_bytes": 4}) == \
        "5 bytes of I/O tensors > budget 4"
    assert PN.bir_sim_skip(["bir_sim"], True, 1, 1) is None
    assert "bir_sim" not in PN.default_pipeline(2, {PN.NO_BIR_SIM})
    root = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                        "neuronxcc")          # the sources (installed, the driver is compiled)
    for rel in ("driver/commands/CompileCommand.py", "driver/jobs/WalrusDriver.py", "walrus/passes/simcheck.py"):
        src = open(os.path.join(root, rel)).read()
        assert not re.search(r"""["']bir_sim["'] (not )?in """, src), rel


def test_the_runner_invalidates_what_a_changing_pass_does_not_preserve(monkeypatch):
    """run_passes drops the cached analyses a pass that changed the module does not list in
    ``preserves`` (and nothing after an unchanged pass); no pass module touches the cache itself."""
    import os
    import re
    from types import SimpleNamespace
    from neuronxcc.hwm import get_target
    from neuronxcc.walrus import registry
    from neuronxcc.walrus.registry import PassContext, run_passes

    class Fake:
        def __init__(self, changed, preserves):
            self.changed, self.spec = changed, SimpleNamespace(preserves=preserves)

        def run(self, module, ctx):
            return self.changed

        def noop_reason(self, ctx):
            return None
    fakes = {"unchanged": Fake(False, ()), "keeps_a": Fake(True, ("a",)), "keeps_none": Fake(True, ())}
    monkeypatch.setattr(registry, "get_pass", fakes.__getitem__)
    ctx = PassContext(get_target("trn1"))
    ctx.analyses.update({"a": 1, ("b", 3): 2})
    run_passes(None, ["unchanged"], ctx)
    assert set(ctx.analyses) == {"a", ("b", 3)}
    run_passes(None, ["keeps_a"], ctx)
    assert set(ctx.analyses) == {"a"}
    run_passes(None, ["keeps_none"], ctx)
    assert ctx.analyses == {}
    pdir = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                        "neuronxcc", "walrus", "passes")
    touch = re.compile(r"\.analyses\s*(\[[^\]]*\]\s*=|\.(clear|pop|update|setdefault)\()|\binvalidate\("
                       r"|del\s+\w+\.analyses")
    bad = ["%s:%d" % (fn, text[:m.start()].count("\n") + 1) for fn in sorted(os.listdir(pdir)) if fn.endswith(".py")
           for text in [open(os.path.join(pdir, fn)).read()] for m in touch.finditer(text)]
    assert bad == [], bad
