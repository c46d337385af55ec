"""Tool start-up (issue 12 item 4): every tool is its own process per the seeds, so what its
imports pull in is paid on every compile. These pin the modules the tools no longer import:
tempfile/shutil/zipfile (and bz2, lzma behind them), numpy.ma (np.unique), protobuf's
descriptor_pb2 (the HLO schema is built from bytes)."""
import subprocess
import sys

from support.cli import _env

HEAVY = ("tempfile", "shutil", "zipfile", "bz2", "lzma", "numpy.ma", "google.protobuf.descriptor_pb2")


def test_tool_modules_import_nothing_heavy_they_do_not_use():
    code = ("import sys\n"
            "import neuronxcc.starfish.penguin.hlo2penguin, neuronxcc.hlo.infergoldens, neuronxcc.hlo.proto_io\n"
            "import neuronxcc.hlo.interpreter, neuronxcc.walrus.driver, neuronxcc.walrus.passes\n"
            "import neuronxcc.starfish.birsim, neuronxcc.starfish.birsim.tool\n"
            "from neuronxcc.common.toolshell import ToolParser\n"
            "p = ToolParser(prog='t'); p.add_argument('--x', default=1); p.parse_args([])\n"
            "print(' '.join(m for m in %r if m in sys.modules))" % (HEAVY,))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env())
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "", r.stdout


def test_atomic_write_needs_no_tempfile(tmp_path):
    code = ("import sys\nfrom neuronxcc.common.toolshell import atomic_write\n"
            "atomic_write(sys.argv[1], 'x')\nprint('tempfile' in sys.modules, open(sys.argv[1]).read())")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "f.txt")], capture_output=True, text=True,
                       env=_env())
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "x"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.txt"]


def test_help_width_follows_the_terminal_as_shutil_finds_it(monkeypatch):
    import shutil

    from neuronxcc.common import toolshell
    for cols in ("150", "61", None):
        if cols is None:
            monkeypatch.delenv("COLUMNS", raising=False)
        else:
            monkeypatch.setenv("COLUMNS", cols)
        assert toolshell._columns() == shutil.get_terminal_size().columns
