"""Lazy access to the compiler's libraries from the driver.

The driver imports no compiler library at module load (``import
neuronxcc.driver.CommandDriver`` stays cheap). Jobs and commands call
``require(module, attr)`` at the moment they need a library. When the module
(or something it needs under ``neuronxcc.``) is not there yet, or does not yet
define ``attr``, this raises ``NotBuiltYetError`` naming what is missing, so a
compile stops with one clear line instead of a traceback or a made-up artifact.
"""
import importlib

from neuronxcc.errors import NotBuiltYetError


def require(module, attr=None, who=None):
    """Import ``module`` (and return ``module.attr`` when ``attr`` is given)."""
    prefix = "%s: " % who if who else ""
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as e:
        missing = e.name or module
        if missing == module or module.startswith(missing + ".") or missing.startswith("neuronxcc."):
            if missing == module or module.startswith(missing + "."):
                raise NotBuiltYetError("%s%s is not built yet" % (prefix, module)) from e
            raise NotBuiltYetError("%s%s is not built yet (needed by %s)" % (prefix, missing, module)) from e
        raise
    if attr is None:
        return mod
    try:
        return getattr(mod, attr)
    except AttributeError as e:
        raise NotBuiltYetError("%s%s.%s is not built yet" % (prefix, module, attr)) from e

