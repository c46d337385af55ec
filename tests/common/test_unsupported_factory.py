"""The one "cannot lower / unsupported" error: every such error is built by ``errors.unsupported``
(directly or through ``unsupported_inst`` / ``cannot_lower``), in one message and location format."""
import ast
import os

from neuronxcc import errors

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "neuronxcc")
# the classes only the factory constructs
FACTORY_ONLY = {"UnsupportedOperatorError", "LoweringError", "UnknownCustomCallError"}


class _Inst:
    opcode = "fft"
    name = "fft.3"
    metadata = {"source_file": "model.py", "source_line": 12}


def test_formats():
    e = errors.unsupported_inst(_Inst(), "no FFT", computation="main")
    assert isinstance(e, errors.UnsupportedOperatorError) and e.code == "NCC_EVRF001"
    assert e.message == "Unsupported operator 'fft' (instruction fft.3 in computation main at model.py:12): no FFT"
    e = errors.cannot_lower("sort", errors.location("sort.1", source="m.py:3"), "rows of 9000 elements")
    assert isinstance(e, errors.LoweringError) and e.code == "NCC_EPEN001"
    assert e.message == "Cannot lower 'sort' (instruction sort.1 at m.py:3): rows of 9000 elements"


def test_no_module_builds_an_unsupported_error_itself():
    bad = []
    for dp, _, fns in os.walk(ROOT):
        for fn in fns:
            path = os.path.join(dp, fn)
            if not fn.endswith(".py") or path == os.path.join(ROOT, "errors.py"):
                continue
            for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
                if isinstance(node, ast.Call):
                    f = node.func
                    name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
                    if name in FACTORY_ONLY:
                        bad.append("%s:%d %s(...)" % (os.path.relpath(path, ROOT), node.lineno, name))
    assert bad == [], "build these through errors.unsupported / unsupported_inst / cannot_lower:\n" + "\n".join(bad)
