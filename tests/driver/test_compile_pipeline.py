"""CompileCommand.buildPipeline: the job-name list for every gate, the walrus
pass list, --pipeline stages, and argument parsing (drop-in-contract 1.2)."""
import argparse
import logging
import os

import pytest

from neuronxcc.driver.commands.CompileCommand import CompileCommand
from neuronxcc.errors import CompilerInvalidInputException, InputFileError, InvalidArgumentError

ADD_PB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "add.hlo_module.pb")
DEFAULT = ["HLOToTensorizer", "XLAInferGoldens", "Frontend", "StaticIOTranspose", "WalrusDriver", "Kelper"]


def test_constructs_without_arguments_and_returns_pipeline_and_args():
    cc = CompileCommand()
    assert cc.getCommandName() == "compile"
    result = cc.buildPipeline([ADD_PB, "--target", "trn1"], logging.getLogger("t"))
    assert isinstance(result, tuple) and len(result) == 2
    pipeline, args = result
    assert isinstance(args, argparse.Namespace)
    assert pipeline.getJobNames() == cc.pipeline == DEFAULT
    assert [type(j).__name__ for j in pipeline] == DEFAULT


def test_default_job_list(build):
    names, args, cc = build()
    assert names == DEFAULT
    assert args.optlevel == "2" and args.output == "file.neff"


def test_meta_module_collapses_front_and_pins_lnc(build):
    names, args, cc = build("--meta-module", "--target", "trn2")
    assert names == ["HLOToTensorizer", "Frontend", "WalrusDriver", "Kelper"]
    assert cc.logical_nc_config == 1
    names, args, cc = build("--target", "trn2")
    assert cc.logical_nc_config == 2 and names == DEFAULT


def test_framework_not_xla_uses_infergoldens(compile_command):
    ns = argparse.Namespace(meta_module=False, framework="TENSORFLOW")
    assert compile_command.collectFrontendPipeline(ns) == [
        "HLOToTensorizer", "InferGoldens", "Frontend", "StaticIOTranspose"]
    ns.framework = "XLA"
    assert compile_command.collectFrontendPipeline(ns)[1] == "XLAInferGoldens"
    # InferGoldens is a registered job (defined next to XLAInferGoldens)
    assert compile_command.jobRegistry.makePipeline(["InferGoldens"]).getJobNames() == ["InferGoldens"]


@pytest.mark.parametrize("flag", ["--enable-internal-modular-compilation", "--enable-internal-bir-linker",
                                  "--layer-unroll-factor=0", "--layer-unroll-factor=-3"])
def test_backend_gate_empties_backend_list(build, flag):
    names, _, _ = build(flag)
    assert names == DEFAULT[:5]


def test_backend_gate_flags(build):
    assert build("--internal-run-standalone-legacy-compilation")[0] == DEFAULT[:5] + ["Backend", "Kelper"]
    assert build("--enable-internal-neff-wrapper")[0] == DEFAULT + ["NeffWrapper"]
    assert build("--internal-run-standalone-legacy-compilation", "--enable-internal-neff-wrapper")[0] == \
        DEFAULT[:5] + ["Backend", "Kelper", "NeffWrapper"]
    assert build("--layer-unroll-factor=4", "--enable-internal-neff-wrapper")[0] == DEFAULT + ["NeffWrapper"]
    assert build("--enable-internal-bir-linker", "--enable-internal-neff-wrapper")[0] == DEFAULT[:5]


@pytest.mark.parametrize("flags", [["-O0"], ["-O1"], ["-O2"], ["-O3"], ["--optlevel=1"], ["--optlevel", "3"],
                                   ["--enable-experimental-O1"], ["-O", "2"]])
def test_optlevel_never_changes_the_job_list(build, flags):
    names, args, cc = build(*flags)
    assert names == DEFAULT
    assert args.optlevel in ("0", "1", "2", "3")


def test_optlevel_shapes_passes_and_flags(build):
    _, a0, cc = build("-O0")
    p0 = list(cc.walrus_passes)
    assert a0.enable_internal_new_backend is False
    _, a1, cc = build("-O1")
    p1 = list(cc.walrus_passes)
    _, a2, cc = build("-O2")
    p2 = list(cc.walrus_passes)
    assert a1.enable_internal_new_backend and a2.enable_internal_new_backend
    assert "linear_scan_allocator" in p0 and "linear_scan_allocator" in p1 and "coloring_allocator" in p2
    assert "unroll" not in p1 and "unroll" in p2
    assert "pre_sched" not in p0 and "pre_sched" in p1
    assert set(p0) < set(p1)
    for p in (p0, p1, p2):
        assert p[0] == "lsa" and p[-2:] == ["birverifier", "bir_sim"]
        assert p.index("anti_dependency_analyzer") > max(p.index(x) for x in p if x.endswith("_allocator"))
    assert build("-O1", "--internal-allocator=coloring")[2].walrus_passes.count("coloring_allocator") == 1


def test_walrus_passes_come_from_the_pass_table(build):
    from neuronxcc.walrus.pass_names import PASS_NAMES

    _, _, cc = build()
    assert cc.walrus_passes and all(p in PASS_NAMES for p in cc.walrus_passes)
    assert len(cc.walrus_passes) == len(set(cc.walrus_passes))


def test_walrus_pass_overrides(build):
    _, _, cc = build("--internal-walrus-passes=lsa,linear_scan_allocator,print_metrics")
    assert cc.walrus_passes == ["lsa", "linear_scan_allocator", "print_metrics"]
    _, _, cc = build("--skip-pass=unroll,dep_reduction")
    assert "unroll" not in cc.walrus_passes and "dep_reduction" not in cc.walrus_passes
    _, _, cc = build("--internal-backend-options= --skip-pass=vn_splitter --enable-verifier=false ")
    assert "vn_splitter" not in cc.walrus_passes and "birverifier" not in cc.walrus_passes
    _, _, cc = build("--internal-experimental-loop-lsa", "--internal-enable-shift-left")
    assert cc.walrus_passes[0] == "experimental_loop_lsa" and "experimental_loop_shift_left" in cc.walrus_passes
    with pytest.raises(InvalidArgumentError, match="unknown walrus pass.*no_such_pass") as ei:
        build("--internal-walrus-passes=lsa,no_such_pass")
    assert ei.value.code == "NCC_EARG010"          # the pass table's one name check (walrus_driver's too)


def test_goldens_dropped_when_nothing_reads_them(build):
    names, _, cc = build("--internal-disable-bir-sim")
    assert "bir_sim" not in cc.walrus_passes
    assert names == [n for n in DEFAULT if n != "XLAInferGoldens"]


def test_pipeline_stages(build):
    assert build("--pipeline", "compile", "SaveTemps")[0] == DEFAULT + ["SaveTemps"]
    # tensorize: the front end only; goldens have no reader there
    assert build("--pipeline", "tensorize", "SaveTemps")[0] == [
        "HLOToTensorizer", "Frontend", "StaticIOTranspose", "SaveTemps"]
    assert build("--pipeline", "compile", "BIRVerifier")[0] == DEFAULT + ["BIRVerifier"]
    _, _, cc = build("--pipeline", "compile", "BIRSim", "--internal-disable-bir-sim")
    assert cc.pipeline == DEFAULT and "bir_sim" in cc.walrus_passes


def test_pipeline_input_after_stage_list(compile_command):
    pipeline, args = compile_command.buildPipeline(["--pipeline", "compile", "SaveTemps", ADD_PB])
    assert args.model_files == [ADD_PB] and args.pipeline == ["compile", "SaveTemps"]


def test_unknown_job_name_in_pipeline(build):
    with pytest.raises(CompilerInvalidInputException, match="NoSuchJob"):
        build("--pipeline", "compile", "NoSuchJob")


# -- argument parsing (drop-in-contract 1.2) ------------------------------------------------
def _split_and_parse(argv):
    """What the driver hands compile for a full neuronx-cc argv, parsed."""
    from neuronxcc.driver.CommandDriver import CommandDriver

    known, delegated = CommandDriver().splitArgs(argv)
    assert known.subcommand == "compile"
    args = CompileCommand().parseArgs(delegated)
    return known, args


ORDERS = [
    ["--target=trn1", "compile", "--framework", "XLA", ADD_PB, "--output", "out.neff", "--verbose=35"],
    ["compile", "--framework=XLA", ADD_PB, "--output=out.neff", "--target", "trn1", "--verbose", "35"],
    ["compile", ADD_PB, "--framework", "XLA", "--target", "trn1", "--output", "out.neff", "--verbose=35"],
    ["--verbose=35", "compile", "--output", "out.neff", "--target=trn1", "--framework=XLA", ADD_PB],
    ["compile", "--framework", "XLA", "--target", "trn1", "-o", "out.neff", ADD_PB, "--verbose", "35"],
    ["--target", "trn1", "--framework", "XLA", "compile", ADD_PB, "--output", "out.neff", "--verbose=35"],
    ["--verbose", "35", "--target", "trn1", "compile", ADD_PB, "--output=out.neff"],
]


def test_argument_orders_parse_to_the_same_namespace():
    results = [_split_and_parse(a) for a in ORDERS]
    first_known, first = results[0]
    for known, args in results[1:]:
        assert vars(args) == vars(first)
        assert known.verbose == first_known.verbose == "35"
    assert first.model_files == [ADD_PB] and first.output == "out.neff" and first.target == "trn1"


def test_caller_spellings_parse_the_same():
    pairs = [
        (["--lnc=1"], ["--lnc", "1"]), (["-lnc", "1"], ["--logical-nc-config=1"]),
        (["-O1"], ["--optlevel=1"]), (["--optlevel", "1"], ["-O", "1"]),
        (["--model-type=transformer"], ["--model-type", "transformer"]),
        (["--pipeline", "compile", "SaveTemps"], ["--pipeline=compile", "--pipeline", "compile", "SaveTemps"]),
    ]
    cc = CompileCommand()
    for a, b in pairs:
        assert vars(cc.parseArgs([ADD_PB] + a)) == vars(cc.parseArgs(b + [ADD_PB])), (a, b)


def test_option_strings_with_spaces_stay_one_element():
    cc = CompileCommand()
    opts = "--enable-ccop-compute-overlap --cc-pipeline-tiling-factor=2 --vectorize-strided-dma"
    h2t = "--verify-hlo=true --modular-flow-mac-threshold=10"
    args = cc.parseArgs(["--tensorizer-options=" + opts, ADD_PB, "--internal-hlo2tensorizer-options", h2t,
                         "--internal-backend-options= --enable-output-completion-notifications "])
    assert args.tensorizer_options == opts
    assert args.internal_hlo2tensorizer_options == h2t
    assert args.internal_backend_options == " --enable-output-completion-notifications "
    assert args.model_files == [ADD_PB]


def test_real_caller_flag_sets_parse():
    cc = CompileCommand()
    nxd = ["--framework", "XLA", "--target", "trn1", "--output", "g.neff", "--auto-cast=none",
           "--model-type=transformer", "--tensorizer-options=--vectorize-strided-dma", "-O1",
           "--internal-num-neuroncores-per-sengine=1", "--enable-internal-neff-wrapper",
           "--enable-saturate-infinity", "--internal-enable-dge-levels", "vector_dynamic_offsets",
           "spill_reload", "--hbm-scratchpad-page-size=1024", "--execute-repetition=3",
           "--internal-dma-order-constraints={\"a\": 1}", "--internal-disable-fma-on-ios",
           "--internal-bir-enable-sb-allocation", "--internal-tensorizer-opt-level=2", "--disable-dge",
           "--temp-dir=/tmp", "--enable-fast-loading-neuron-binaries"]
    args = cc.parseArgs([ADD_PB] + nxd)
    assert args.internal_enable_dge_levels == ["vector_dynamic_offsets", "spill_reload"]
    assert args.model_files == [ADD_PB] and args.optlevel == "1" and args.execute_repetition == 3
    assert cc.unknown_args == []


def test_unknown_flags_warn_and_do_not_eat_the_input(caplog):
    cc = CompileCommand()
    with caplog.at_level(logging.WARNING):
        args = cc.parseArgs(["--no-such-flag", "value", ADD_PB, "--other-unknown=3", "--bool-unknown"])
    assert args.model_files == [ADD_PB]
    assert cc.unknown_args == [["--no-such-flag", "value"], ["--other-unknown=3"], ["--bool-unknown"]]
    assert "--no-such-flag value" in caplog.text and "--other-unknown=3" in caplog.text
    args = cc.parseArgs(["--bool-unknown", ADD_PB])
    assert args.model_files == [ADD_PB]


def test_validation_errors(build, tmp_path):
    with pytest.raises(InputFileError, match="not found"):
        build(inp=str(tmp_path / "missing.pb"))
    empty = tmp_path / "empty.pb"
    empty.write_bytes(b"")
    with pytest.raises(InputFileError, match="empty"):
        build(inp=str(empty))
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for special in (str(fifo), os.devnull):  # reading would block, or never see a model
        with pytest.raises(InputFileError, match="is not a regular file or a model directory"):
            build(inp=special)
    with pytest.raises(InvalidArgumentError, match="NCC_EARG001|config 2"):
        build("--target", "trn1", "--lnc", "2")
    with pytest.raises(InvalidArgumentError):
        build("--target", "nosuch")
    with pytest.raises(InvalidArgumentError, match="output directory"):
        build("--output", str(tmp_path / "no" / "dir" / "x.neff"))
    with pytest.raises(InvalidArgumentError, match="implicit-integer-downcast"):
        build("--implicit-integer-downcast=dot,bogus")
    assert build("--implicit-integer-downcast=dot,pow")[1].implicit_integer_downcast == "dot,pow"


def test_auto_cast_flags_are_validated_up_front(build):
    # the reference's defaults (CLI reference since neuronx-cc 2.22, see penguin/autocast.py):
    # --auto-cast none, --auto-cast-type bf16
    assert (build()[1].auto_cast, build()[1].auto_cast_type) == ("none", "bf16")
    build("--auto-cast=none", "--auto-cast-type=tf32")           # nothing is cast: accepted
    assert build("--auto-cast", "all", "--auto-cast-type", "tf32")[1].auto_cast_type == "tf32"
    with pytest.raises(InvalidArgumentError, match="--fast-math: unknown value 'bogus'"):
        build("--fast-math=bogus")
    assert build("--fast-math=fp32-cast-matmult-fp16")[1].fast_math == "fp32-cast-matmult-fp16"


def test_lnc2_is_decided_by_the_codegen_not_the_driver(build, caplog):
    # whether a program is split between the two cores of an LNC=2 logical core is known only when
    # it is lowered (penguin/lnc.py, tests/e2e/test_lnc.py); the driver says nothing for a whole module
    for flags in (("--target", "trn1"), ("--target", "trn2"), ("--target", "trn2", "--lnc", "2"),
                  ("--target", "trn2", "--lnc", "1")):
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            build(*flags)
        assert "lnc" not in caplog.text.lower()
    with caplog.at_level(logging.WARNING):
        build("--target", "trn2", "--meta-module")
    assert "--lnc 2 with --meta-module" in caplog.text
