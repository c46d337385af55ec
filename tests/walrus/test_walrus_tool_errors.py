"""Bad input to the walrus tools: each names itself in exactly one [NCC_...] line, exit 70.

The matrix runs the tools' mains in-process (fast); the cases that depend on
the console (logging's last-resort handler, the launchers) run as programs.
"""
import json

import pytest

from neuronxcc.starfish import birpy as B
from neuronxcc.starfish.tools import run_tool as run_in_process
from support.cli import run_tool
from support.walrus_programs import random_program

TOOLS = ("walrus_bugpoint_driver", "coloring_allocator_with_loop", "full_unroll")


def _argv(tool, path, out):
    if tool == "walrus_bugpoint_driver":
        return [path, "--predicate", "verifier", "--output", out, "-q"]
    return [path, "--output", out]


def _good(tmp_path):
    p = tmp_path / "good.json"
    B.save(random_program(3), str(p))
    return p


def _bad_inputs(tmp_path):
    """name -> path of an input each tool must reject as bad input."""
    good = json.loads(_good(tmp_path).read_text())
    files = {"corrupt": "{\"format\": \"bir\", ", "not_bir": json.dumps({"format": "hlo"}),
             "binary": b"\xff\xfe\x00garbage"}
    # JSON that parses and claims to be BIR but does not load as a module
    for name, edit in (("body_entry_not_a_node", lambda d: d["body"].insert(0, 7)),
                       ("body_not_a_list", lambda d: d.__setitem__("body", "x")),
                       ("instruction_without_opcode", lambda d: d["body"].insert(0, {"kind": "inst"})),
                       ("unparsable_offset", lambda d: d["body"][0]["dsts"][0].__setitem__("offset", "((("))):
        d = json.loads(json.dumps(good))
        edit(d)
        files[name] = json.dumps(d)
    paths = {"missing": str(tmp_path / "missing.json"), "directory": str(tmp_path)}
    for name, text in files.items():
        p = tmp_path / (name + ".json")
        (p.write_bytes if isinstance(text, bytes) else p.write_text)(text)
        paths[name] = str(p)
    return paths


def _one_line(err, tool):
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    line = lines[0]
    assert line.startswith("[NCC_E"), line           # bad input, not an internal error
    assert line.split("] ", 1)[1].startswith(tool + ": "), line
    assert tool == "walrus_driver" or "walrus_driver" not in line, line
    return line


@pytest.mark.parametrize("tool", TOOLS)
def test_bad_inputs_are_one_line_naming_the_tool(tool, tmp_path, capsys):
    out = tmp_path / "out.json"
    for case, path in _bad_inputs(tmp_path).items():
        assert run_in_process(tool, _argv(tool, path, str(out))) == 70, case
        cap = capsys.readouterr()
        line = _one_line(cap.err, tool)
        assert line.startswith("[NCC_EBIR001] ") and path in line, (case, line)
        assert cap.out == "" and not out.exists(), case


@pytest.mark.parametrize("tool", TOOLS)
def test_usage_errors_name_the_tool(tool, tmp_path, capsys):
    good = str(_good(tmp_path))
    cases = {"no arguments": ([], "required"),
             "unknown flag": (_argv(tool, good, str(tmp_path / "o.json")) + ["--no-such-flag"], "--no-such-flag"),
             "unwritable output": (_argv(tool, good, str(tmp_path / "no" / "dir" / "o.json")), "no/dir/o.json")}
    if tool != "full_unroll":
        cases["unknown target"] = (_argv(tool, good, str(tmp_path / "o.json")) + ["--target", "trn9"], "trn9")
    if tool == "walrus_bugpoint_driver":
        # the verifier predicate must hold before anything is written: give it a module it rejects
        m = random_program(3)
        m.body.insert(0, B.Instruction("matmul", "DVE", [B.AccessPattern("b0", "float32", 0, [[1, 16]], 0, 128)],
                                       [B.AccessPattern("b1", "float32", 0, [[1, 16]], 0, 128)] * 2,
                                       {"psum_zero": True}))
        m.renumber()
        B.save(m, str(tmp_path / "bad.json"))
        cases["unwritable output"] = (_argv(tool, str(tmp_path / "bad.json"), str(tmp_path / "no" / "dir" / "o.json")),
                                      "no/dir/o.json")
        cases["unknown predicate"] = ([good, "--predicate", "astrology"], "astrology")
    for case, (argv, needle) in cases.items():
        assert run_in_process(tool, argv) == 70, case
        line = _one_line(capsys.readouterr().err, tool)
        assert needle in line, (case, line)
    # --help is still argparse's usage, under the tool's own name
    assert run_in_process(tool, ["--help"]) == 0        # the tool shell returns argparse's exit status
    assert capsys.readouterr().out.startswith("usage: %s " % tool)


@pytest.mark.parametrize("tool", TOOLS + ("walrus_driver",))
def test_programs_print_no_traceback(tool, tmp_path):
    """As programs, with no log file set up: one line (logging must not print the traceback)."""
    r = run_tool(tool, ["--no-such-flag"])
    assert r.returncode == 70
    _one_line(r.stderr, tool)
    (tmp_path / "c.json").write_text("{")
    argv = (["--input", str(tmp_path / "c.json"), "--output", str(tmp_path / "o.json")] if tool == "walrus_driver"
            else _argv(tool, str(tmp_path / "c.json"), str(tmp_path / "o.json")))
    r = run_tool(tool, argv)
    assert r.returncode == 70 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith("[NCC_EBIR001]") and "c.json" in r.stderr
