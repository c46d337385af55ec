"""Malformed BIR JSON (a bir.json, or an engine stream a NEFF carries) is refused with
BirFormatError, and what loads but breaks a rule with BirVerifyError: every field of
a module that uses every node kind, replaced in turn by values of the wrong type,
never raises another exception type."""
import copy
import os
import sys

import pytest

from neuronxcc.errors import BirFormatError, CompilerError  # noqa: E402
from neuronxcc.starfish import birpy as B  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_serde import _module  # noqa: E402

BAD_VALUES = [None, -1, 1.5, "x", [], {}, [1], True, 10 ** 30]


def _paths(obj, path=()):
    yield path
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for k, v in items:
        yield from _paths(v, path + (k,))


def _set(obj, path, value):
    for k in path[:-1]:
        obj = obj[k]
    obj[path[-1]] = value


def test_every_field_with_a_wrong_value_gives_a_compiler_error():
    base = B.to_json(_module(), const_data=True)
    checked = 0
    for path in list(_paths(base))[1:]:
        for bad in BAD_VALUES:
            obj = copy.deepcopy(base)
            _set(obj, path, bad)
            try:
                B.verify(B.from_json(obj))
            except CompilerError:
                pass
            except Exception as e:   # noqa: BLE001 -- the point of the test
                pytest.fail("%s = %r raised %s: %s" % ("/".join(map(str, path)), bad, type(e).__name__, e))
            checked += 1
    assert checked > 1000


@pytest.mark.parametrize("stream", [{"kind": "inst"}, [17], [{"kind": "loop", "var": "i", "start": 0, "stop": "9",
                                                                "body": []}],
                                    [{"kind": "inst", "opcode": "nop", "engine": "PE", "waits": [["s"]]}]])
def test_malformed_engine_stream(stream):
    with pytest.raises(BirFormatError):
        B.stream_from_json(stream)


def test_deeply_nested_control_is_a_format_error():
    node = {"kind": "if", "cond": "r", "then": [], "else": []}
    for _ in range(5000):
        node = {"kind": "if", "cond": "r", "then": [node], "else": []}
    with pytest.raises(BirFormatError, match="nested too deeply"):
        B.from_json({"format": "bir", "version": 1, "body": [node]})
