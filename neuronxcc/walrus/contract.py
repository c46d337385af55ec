"""The walrus pass contract: the pass base class and what a pass may read (``PassContext``).

Owns: ``WalrusPass`` (a ``name`` from the pass table and ``run(module, ctx) -> bool``),
``NoOpPass`` (a seed name with nothing to do, saying why), ``PassContext`` (target, goldens,
the options the table declares, the analysis cache a pass reads through ``analysis``) and
``invalidate`` (the runner's analysis invalidation).

Imports only the pass table (``pass_names``): the pass modules import this module, and the
registry (``registry``) imports the pass modules, so nothing here may import either.
"""
from neuronxcc import errors
from neuronxcc.walrus import pass_names as PN
from neuronxcc.walrus.pass_names import PASS_NAMES


class WalrusPass:
    """Base class. Subclasses set ``name`` and override ``run``."""

    name = None

    @property
    def spec(self):
        """The pass's row of the table (``pass_names.PassSpec``)."""
        return PN.SPECS[self.name]

    def run(self, module, ctx):  # pragma: no cover - interface
        raise NotImplementedError

    def noop_reason(self, ctx):
        """None when the pass does real work on ``ctx.target``; else why it is a no-op."""
        return None

    @property
    def description(self):
        return PASS_NAMES.get(self.name, "")


class NoOpPass(WalrusPass):
    """A seed pass with nothing to do in this reimplementation; it says why."""

    def __init__(self, name, reason):
        self.name = name
        self.reason = reason

    def run(self, module, ctx):
        return False

    def noop_reason(self, ctx):
        return self.reason


class PassContext:
    """What a pass may read besides the module.

    target       -- ``neuronxcc.hwm.TargetModel``
    goldens      -- path of goldens.npz or None
    options      -- dict of tunables: the keys the pass table declares (``pass_names``),
                    with their defaults; any other key is refused
    metrics      -- dict the print_metrics pass fills (written by the driver)
    analyses     -- cache of analysis results keyed by name (or (name, variant)); read
                    through ``analysis``; the runner drops entries when a pass changes
                    the module
    analysis_runs -- analysis name -> how many times it was computed
    timings      -- list of (pass name, seconds, changed)
    """

    def __init__(self, target, goldens=None, options=None):
        self.target = target
        self.goldens = goldens
        self.options = PN.default_options()
        bad = sorted(set(options or ()) - set(self.options))
        if bad:
            raise errors.InvalidArgumentError(
                "unknown walrus option%s %s (known: %s)" % ("s" if len(bad) > 1 else "", ", ".join(bad),
                                                              ", ".join(sorted(self.options))), code="NCC_EARG011")
        self.options.update(options or {})
        self.metrics = {}
        self.analyses = {}
        self.analysis_runs = {}
        self.timings = []
        self.current = None         # the pass the runner is running (its row's ``needs`` are checked)

    def _check(self, name):
        base = name[0] if isinstance(name, tuple) else name
        if self.current is not None and base not in PN.SPECS[self.current].needs:
            raise errors.InternalCompilerError(
                "walrus pass %s reads analysis %r that its pass-table row does not declare"
                % (self.current, base))
        return base

    def analysis(self, name, compute):
        """The cached analysis ``name``, computed by ``compute()`` when the cache has none."""
        self._check(name)
        v = self.analyses.get(name)
        if v is None:
            v = compute()
            self.analyses[name] = v
            self.count_analysis(name)
        return v

    def cached(self, name):
        """The cached analysis ``name`` or None (no computation)."""
        self._check(name)
        return self.analyses.get(name)

    def store(self, name, value, computed=True):
        """Cache ``value`` as analysis ``name`` (computed by the caller) and count the computation
        (``computed=False``: a result computed earlier, put back because it is still valid)."""
        self._check(name)
        self.analyses[name] = value
        if computed:
            self.count_analysis(name)

    def drop(self, name):
        """Forget every cached entry of analysis ``name`` (a pass that rewrites what it describes
        and stores the new result itself)."""
        self._check(name)
        for k in [k for k in self.analyses if (k[0] if isinstance(k, tuple) else k) == name]:
            del self.analyses[k]

    def count_analysis(self, name):
        key = name[0] if isinstance(name, tuple) else name
        self.analysis_runs[key] = self.analysis_runs.get(key, 0) + 1


def invalidate(ctx, preserves=()):
    """Drop every cached analysis whose name is not in ``preserves``."""
    for k in list(ctx.analyses):
        if (k[0] if isinstance(k, tuple) else k) not in preserves:
            del ctx.analyses[k]
