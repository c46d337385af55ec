"""Build script for neuronxcc.

What it builds:
  * every ``.pyx`` under ``neuronxcc/`` (the typed-Cython hot paths: pelican,
    birsim, allocators, schedulers, dependence analysis);
  * every ``.py`` module under ``neuronxcc/driver/`` and ``neuronxcc/starfish/penguin/``
    compiled by Cython, laid out like the original wheel (the ``.py`` sources are not
    shipped for them);
  * the eight builtin custom-op CPU libraries
    ``neuronxcc/data/custom_op/libbuiltincustomop_cpu{0..7}.so`` from the C
    sources in ``csrc/custom_op/`` (one per GpSimd CPU, ``-DNCC_CPU_ID=i``).

Builds run in parallel (``build_ext --parallel`` defaults to the core count).
``build_ext --inplace`` (the developer build) compiles the ``.pyx`` hot paths
and the custom-op libraries only; the driver and penguin stay pure Python in a
checkout so edits take effect without a rebuild.
"""
import glob
import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
NCPU = os.cpu_count() or 1
CUSTOM_OP_PREFIX = "libbuiltincustomop_cpu"
NUM_CUSTOM_OP_CPUS = 8


def _module_name(path):
    return os.path.splitext(os.path.relpath(path, HERE))[0].replace(os.sep, ".")


def _pyx_sources():
    return sorted(glob.glob(os.path.join(HERE, "neuronxcc", "**", "*.pyx"), recursive=True))


# Pure-Python packages compiled by Cython at install, as the original wheel ships them
# (driver/, driver/jobs/, starfish/penguin/ as extensions); a checkout keeps them editable.
COMPILED_PACKAGES = (("neuronxcc", "driver"), ("neuronxcc", "starfish", "penguin"))


def _compiled_py_sources():
    out = []
    for pkg in COMPILED_PACKAGES:
        for path in sorted(glob.glob(os.path.join(HERE, *pkg, "**", "*.py"), recursive=True)):
            if os.path.basename(path) == "__init__.py":
                continue
            out.append(path)
    return out


PY_COMPILED = {_module_name(p) for p in _compiled_py_sources()}


def _numpy_include():
    import numpy

    return numpy.get_include()


def _cython_extensions(include_py):
    from Cython.Build import cythonize

    exts = []
    for path in _pyx_sources():
        exts.append(Extension(_module_name(path), [os.path.relpath(path, HERE)],
                              include_dirs=[_numpy_include()],
                              define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
                              extra_compile_args=["-O2"]))
    if include_py:
        for path in _compiled_py_sources():
            # Glue and the middle-end's Python, not the typed hot paths: -O1 keeps the build fast.
            exts.append(Extension(_module_name(path), [os.path.relpath(path, HERE)],
                                  extra_compile_args=["-O1"]))
    if not exts:
        return []
    return cythonize(exts, nthreads=NCPU, language_level=3, quiet=True,
                     compiler_directives={"binding": True, "embedsignature": True})


def _custom_op_extensions():
    srcs = sorted(glob.glob(os.path.join(HERE, "csrc", "custom_op", "*.c")))
    if not srcs:
        return []
    rel = [os.path.relpath(s, HERE) for s in srcs]
    return [Extension("neuronxcc.data.custom_op.%s%d" % (CUSTOM_OP_PREFIX, i), rel,
                      define_macros=[("NCC_CPU_ID", str(i)), ("NCC_TOTAL_CPUS", str(NUM_CUSTOM_OP_CPUS))],
                      extra_compile_args=["-O2", "-fvisibility=hidden", "-std=c11"])
            for i in range(NUM_CUSTOM_OP_CPUS)]


class BuildExt(build_ext):
    def initialize_options(self):
        super().initialize_options()
        self.parallel = NCPU

    def finalize_options(self):
        super().finalize_options()
        if self.inplace:
            # Developer build: keep the driver and penguin as plain Python in the checkout.
            self.extensions = [e for e in self.extensions if e.name not in PY_COMPILED]
        only = [p for p in os.environ.get("NCC_BUILD_ONLY", "").split(",") if p]
        if only:
            # scripts/dev_build.py: build a subset (so parallel work does not collide).
            self.extensions = [e for e in self.extensions if any(e.name.startswith(p) for p in only)]
        self.distribution.ext_modules = self.extensions

    def get_ext_filename(self, fullname):
        leaf = fullname.rsplit(".", 1)[-1]
        if leaf.startswith(CUSTOM_OP_PREFIX):
            # Plain shared libraries, not Python extension modules.
            return os.path.join(*fullname.split(".")) + ".so"
        return super().get_ext_filename(fullname)

    def get_export_symbols(self, ext):
        if ext.name.rsplit(".", 1)[-1].startswith(CUSTOM_OP_PREFIX):
            return []
        return super().get_export_symbols(ext)

    def build_extension(self, ext):
        leaf = ext.name.rsplit(".", 1)[-1]
        if leaf.startswith(CUSTOM_OP_PREFIX):
            # No Python headers or libpython needed for the custom-op CPU libraries.
            # The eight libraries share their sources but not their -D flags, so
            # each gets its own object directory (a shared one races under
            # --parallel and mixes CPU ids between libraries).
            ext.libraries = []
            objects = self.compiler.compile(ext.sources, output_dir=os.path.join(self.build_temp, leaf),
                                            macros=ext.define_macros, include_dirs=ext.include_dirs,
                                            extra_postargs=ext.extra_compile_args, depends=ext.depends)
            out = self.get_ext_fullpath(ext.name)
            os.makedirs(os.path.dirname(out), exist_ok=True)
            self.compiler.link_shared_object(objects, out, extra_postargs=ext.extra_link_args,
                                             target_lang="c")
            return
        super().build_extension(ext)


class BuildPy(build_py):
    """Ship the compiled driver and penguin modules as extensions only, like the original wheel."""

    def find_package_modules(self, package, package_dir):
        mods = super().find_package_modules(package, package_dir)
        return [(pkg, mod, path) for (pkg, mod, path) in mods
                if "%s.%s" % (pkg, mod) not in PY_COMPILED]

    def run(self):
        super().run()
        # A build/lib left by an earlier build (when penguin still shipped as .py) must not put
        # those sources back into the wheel next to their extensions.
        for mod in PY_COMPILED:
            stale = os.path.join(self.build_lib, *mod.split(".")) + ".py"
            if os.path.exists(stale):
                os.remove(stale)
        # setuptools copies package data without its mode: the starfish tools
        # must stay executable in the wheel.
        tools = glob.glob(os.path.join(HERE, "neuronxcc", "starfish", "bin", "**"), recursive=True)
        for src in [os.path.join(HERE, "neuronxcc", "starfish", "launch.sh")] + tools:
            dst = os.path.join(self.build_lib, os.path.relpath(src, HERE))
            if os.path.isfile(dst) and os.access(src, os.X_OK):
                os.chmod(dst, 0o755)


def _include_compiled_py():
    # ``setup.py build_ext --inplace`` is the developer build.
    return "--inplace" not in sys.argv and "-i" not in sys.argv


setup(
    ext_modules=_cython_extensions(_include_compiled_py()) + _custom_op_extensions(),
    cmdclass={"build_ext": BuildExt, "build_py": BuildPy},
    packages=[p.replace(os.sep, ".") for p in
              sorted({os.path.relpath(os.path.dirname(f), HERE)
                      for f in glob.glob(os.path.join(HERE, "neuronxcc", "**", "__init__.py"), recursive=True)})],
    package_data={"neuronxcc": ["starfish/bin/*", "starfish/bin/private/*", "starfish/launch.sh", "data/custom_op/*",
                                "**/*.pxd", "**/*.json", "examples/*"]},
    include_package_data=False,
    zip_safe=False,
)
