"""The HLO readers' JAX corpus (tests/hlo/reader_corpus.py: attribute forms,
literal types, fft, custom calls) through the reference interpreter against
XLA:CPU. Programs whose ops are deliberately unsupported must fail with the
op named, never with a wrong answer."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reader_corpus as rc  # noqa: E402

from neuronxcc.errors import UnsupportedOperatorError  # noqa: E402
from support.corpus import interpreter_mismatches  # noqa: E402

# programs that use ops outside the table on purpose (the LAPACK custom-call of cholesky)
UNSUPPORTED = {"custom_call": "lapack_"}


@pytest.mark.parametrize("name", sorted(rc.PROGRAMS))
def test_reader_corpus_program_matches_xla(name):
    fn, args = rc.PROGRAMS[name]
    if name in UNSUPPORTED:
        with pytest.raises(UnsupportedOperatorError, match=UNSUPPORTED[name]):
            interpreter_mismatches(fn, list(args))
        return
    problems = interpreter_mismatches(fn, list(args))
    assert not problems, "\n".join(problems)
