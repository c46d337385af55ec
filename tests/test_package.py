"""Package-level facts: version, hardware model, tool launchers."""
import os
import re

import neuronxcc
from neuronxcc import hwm
from support.cli import run_tool, tool_path
from neuronxcc.starfish.tools import TOOLS


def test_version_is_pep440_and_matches_framework_regex():
    assert re.fullmatch(r"[\w\.+]+", neuronxcc.__version__)
    assert neuronxcc.__version__.startswith("2.24.")


def test_hwm_trn1_numbers():
    t = hwm.get_target("trn1")
    assert t.num_partitions == 128
    assert t.sbuf_partition_bytes == 192 * 1024
    assert t.sbuf_usable_bytes == 180224
    assert t.psum_partition_bytes == 16 * 1024
    assert t.psum_num_banks * t.psum_bank_bytes == t.psum_partition_bytes
    assert abs(t.peak_flops("bfloat16") - 91.75e12) < 0.1e12
    assert t.peak_flops("float32") * 4 == t.peak_flops("bfloat16")
    assert hwm.get_target("TRN2").sbuf_usable_bytes == 212984


def test_every_tool_is_an_executable_in_starfish_bin():
    for name in TOOLS:
        p = tool_path(name)
        assert os.path.isfile(p), p
        assert os.access(p, os.X_OK), p
    assert os.path.isdir(os.path.join(os.path.dirname(tool_path("birsim")), "private"))


def test_tool_launcher_works_with_minimal_path():
    r = run_tool("walrus_driver", ["--help"], env={"PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert "usage: walrus_driver" in r.stdout and "--walrus-passes" in r.stdout
    assert r.stderr == ""
    r = run_tool("walrus_driver", ["--no-such-flag"], env={"PATH": "/usr/bin:/bin"})
    assert r.returncode == 70 and r.stderr.startswith("[NCC_EARG002] walrus_driver: ") and "--no-such-flag" in r.stderr
    assert "Traceback" not in r.stderr
