"""Compile snapshots: what SaveTemps writes and ``snapshot-unpack`` reads.

A snapshot is a gzip'd tar with
  manifest.json          versions, the flags, the job list and walrus passes
  inputs/<name>          the input exactly as the user gave it (file or directory)
  model.hlo_module.pb    the staged HloModuleProto, when it was written
``snapshot-unpack SNAPSHOT [-o DIR] [--replay]`` extracts it (refusing members
that would land outside DIR) and writes ``DIR/replay.sh``, which reruns the
compile with the same flags on the saved input (the NEFF goes into DIR).
"""
import io
import json
import os
import platform
import shlex
import sys
import tarfile
import time

from neuronxcc.errors import CompilerError, InputFileError, InternalCompilerError, InvalidArgumentError

MANIFEST = "manifest.json"
FORMAT = 1


def _versions():
    from neuronxcc.driver.CommandDriver import numpyVersion
    from neuronxcc.version import __hwm_version__, __version__

    return {"neuronxcc": __version__, "hwm": __hwm_version__, "python": platform.python_version(),
            "numpy": numpyVersion()}


def replayFlags(state):
    """The compile flags to replay with: every option except --output and --temp-dir."""
    split = state.argv_split
    if split is None:
        return []
    from neuronxcc.driver.Arguments import dropOptions

    flags = dropOptions(state.command.parser, split.options, ("output", "temp_dir"))
    for unk in split.unknown:
        flags += unk
    return flags


def writeSnapshot(state, name):
    """Write the snapshot of ``state``'s compile to ``name`` (relative to the cwd = work dir)."""
    src = state.input_path
    base = os.path.basename(os.path.normpath(src))
    out_name = os.path.basename(state.output or "file.neff")
    manifest = {
        "format": FORMAT,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "versions": _versions(),
        "input": "inputs/" + base,
        "original_input": src,
        "output": out_name,
        "flags": replayFlags(state),
        "jobs": list(getattr(state.command, "pipeline", None) or []),
        "walrus_passes": state.walrus_passes,
    }
    from neuronxcc.common.toolshell import atomic_output
    with atomic_output(name) as tmp, tarfile.open(tmp, "w:gz") as tar:
        data = json.dumps(manifest, indent=2).encode()
        info = tarfile.TarInfo(MANIFEST)
        info.size = len(data)
        info.mtime = int(time.time())
        tar.addfile(info, io.BytesIO(data))
        tar.add(src, arcname="inputs/" + base)
        from neuronxcc.driver.CompileState import MODEL

        if os.path.isfile(MODEL):
            tar.add(MODEL, arcname=MODEL)
    return name


def _safeMembers(tar, dest):
    root = os.path.realpath(dest)
    for m in tar.getmembers():
        target = os.path.realpath(os.path.join(root, m.name))
        if not (target == root or target.startswith(root + os.sep)):
            raise InputFileError("snapshot member escapes the output directory: %s" % m.name)
        if m.issym() or m.islnk() or m.isdev():
            raise InputFileError("snapshot member is not a regular file or directory: %s" % m.name)
        yield m


def unpack(snapshot, dest):
    """Extract ``snapshot`` into ``dest``; returns the manifest (dict) and writes replay.sh."""
    if os.path.isdir(snapshot):
        raise InputFileError("snapshot %s is a directory; give the snapshot.tar.gz in it" % snapshot)
    if not os.path.isfile(snapshot):
        raise InputFileError("snapshot not found: %s" % snapshot)
    try:
        tar = tarfile.open(snapshot, "r:*")
    except (tarfile.TarError, EOFError, OSError) as e:
        raise InputFileError("cannot read snapshot %s: %s" % (snapshot, str(e).split("\n")[0]))
    with tar:
        try:
            names = tar.getnames()
        except (tarfile.TarError, EOFError, OSError) as e:
            raise InputFileError("cannot read snapshot %s: %s" % (snapshot, e))
        if MANIFEST not in names:
            raise InputFileError("%s is not a neuronx-cc snapshot (no %s)" % (snapshot, MANIFEST))
        try:
            os.makedirs(dest, exist_ok=True)
        except OSError as e:
            raise InvalidArgumentError("cannot create the output directory %s: %s" % (dest, e.strerror or e))
        members = list(_safeMembers(tar, dest))
        try:
            if hasattr(tarfile, "data_filter"):
                tar.extractall(dest, members=members, filter="data")
            else:  # pragma: no cover - Pythons without extraction filters
                tar.extractall(dest, members=members)
        except (tarfile.TarError, EOFError) as e:
            raise InputFileError("cannot read snapshot %s: %s" % (snapshot, e))
        except OSError as e:
            raise InvalidArgumentError("cannot unpack into %s: %s" % (dest, e.strerror or e))
    try:
        with open(os.path.join(dest, MANIFEST)) as f:
            manifest = json.load(f)
        argv = ["compile", str(manifest["input"])] + [str(a) for a in manifest.get("flags", [])] + [
            "--output", str(manifest["output"])]
        version = manifest.get("versions", {}).get("neuronxcc", "?")
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise InputFileError("%s: malformed %s (%s: %s)" % (snapshot, MANIFEST, type(e).__name__, e))
    script = os.path.join(dest, "replay.sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\n# Replays a neuronx-cc compile saved by SaveTemps (compiler %s).\n"
                'cd "$(dirname -- "$0")" || exit 1\nexec "${NEURONX_CC:-neuronx-cc}" %s "$@"\n'
                % (version, shlex.join(argv)))
    os.chmod(script, 0o755)
    manifest["replay_argv"] = argv
    return manifest


def unpack_main(argv):
    """The ``snapshot-unpack`` tool. Every error is one ``[NCC_...]`` line on stderr and status 70."""
    from neuronxcc.driver.Arguments import InterceptingArgumentParser

    p = InterceptingArgumentParser(prog="snapshot-unpack",
                                   description="Unpack a neuronx-cc compile snapshot (written by SaveTemps) "
                                               "and write replay.sh to rerun the compile.")
    p.add_argument("snapshot", help="the snapshot.tar.gz from a work directory kept by SaveTemps")
    p.add_argument("-o", "--output-dir", default=None, help="where to unpack (default: ./<snapshot>-unpacked)")
    p.add_argument("--replay", action="store_true", help="run the compile after unpacking")
    try:
        args = p.parse_args(argv)
        dest = args.output_dir or os.path.basename(args.snapshot).split(".")[0] + "-unpacked"
        manifest = unpack(args.snapshot, dest)
    except CompilerError as e:
        sys.stderr.write(e.one_line() + "\n")
        return os.EX_SOFTWARE
    except SystemExit as e:  # --help
        return e.code if isinstance(e.code, int) else 0
    except Exception as e:  # a bug: still one line, no traceback
        sys.stderr.write(InternalCompilerError("snapshot-unpack: %s: %s" % (type(e).__name__, e)).one_line() + "\n")
        return os.EX_SOFTWARE
    print("Unpacked %s to %s" % (args.snapshot, dest))
    print("Replay with: %s" % os.path.join(dest, "replay.sh"))
    if args.replay:
        from neuronxcc.driver.CommandDriver import CommandDriver

        cwd = os.getcwd()
        os.chdir(dest)
        try:
            return CommandDriver().run(["neuronx-cc"] + manifest["replay_argv"])
        finally:
            os.chdir(cwd)
    return 0
