"""Run the package's command-line programs the way a framework does."""
import os
import shutil
import subprocess
import sys

import neuronxcc


def package_dir():
    return os.path.dirname(os.path.abspath(neuronxcc.__file__))


def tool_path(name):
    """Absolute path of a starfish/bin executable of the package under test."""
    return os.path.join(package_dir(), "starfish", "bin", name)


def ncc_command():
    """argv prefix that runs ``neuronx-cc`` from the package under test."""
    exe = os.path.join(os.path.dirname(sys.executable), "neuronx-cc")
    if os.path.exists(exe) and _is_installed():
        return [exe]
    return [sys.executable, _checkout_script()]


# What pip writes as the console script (pyproject's [project.scripts]), for a checkout that is not
# installed. Run as a file named neuronx-cc it ends as the installed program does (toolshell.exit_script:
# exit_now, no heap teardown); ``python -c`` would take the in-process path (SystemExit, teardown).
_CONSOLE_SCRIPT = """import sys
from neuronxcc.driver.CommandDriver import main
if __name__ == '__main__':
    sys.exit(main())
"""
_script_dir = []


def _checkout_script():
    if not _script_dir:
        import atexit
        import tempfile

        d = tempfile.mkdtemp(prefix="neuronxcc-bin-")
        atexit.register(shutil.rmtree, d, True)
        with open(os.path.join(d, "neuronx-cc"), "w") as f:
            f.write(_CONSOLE_SCRIPT)
        _script_dir.append(d)
    return os.path.join(_script_dir[0], "neuronx-cc")


def _is_installed():
    return "site-packages" in package_dir() or "dist-packages" in package_dir()


def _env():
    env = dict(os.environ)
    if not _is_installed():
        parent = os.path.dirname(package_dir())
        env["PYTHONPATH"] = parent + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def run_ncc(args, cwd=None, timeout=600, input=None):
    """Run ``neuronx-cc ARGS``; returns CompletedProcess with text stdout/stderr."""
    return subprocess.run(ncc_command() + list(args), cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=_env(), input=input)


def run_tool(name, args, cwd=None, timeout=600, env=None):
    """Run a starfish/bin tool by absolute path."""
    e = _env()
    if env:
        e.update(env)
    return subprocess.run([tool_path(name)] + list(args), cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=e)


def which(name):
    return shutil.which(name, path=os.path.dirname(sys.executable))
