"""Argument definitions and argv handling shared by the driver and its commands.

Owns:
  * ``InterceptingArgumentParser``: the tool shell's parser
    (``neuronxcc.common.toolshell.ToolParser``: ``InvalidArgumentError``, one NCC_
    line, exit 70, instead of printing usage and exiting 2) that can also hide
    internal flags from ``--help`` (shown by ``--help-hidden``);
  * ``splitArgv``: splits a command's argv into positionals, known options and
    unknown options *before* argparse sees it, so that argument order never
    matters (the input may come before or after the flags, ``--pipeline`` may
    be followed by the input) and an unknown flag's value never becomes an
    input file. Unknown flags are returned so the caller can warn about them.
  * ``addCompileArguments``: the compile flag surface (public flags of the
    documented CLI, flags real callers pass, and the internal flags the
    pipeline gates read). Job classes add their own flags via ``RegisterArgs``.

Option strings that contain spaces (``--tensorizer-options='--a --b'``) are one
argv element and stay one string value; nothing here splits them again.
"""
import argparse
import os
import re

from neuronxcc.common.toolshell import ToolParser

_IDENT = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_NEGNUM = re.compile(r"^-\d+$|^-\d*\.\d+$")


class InterceptingArgumentParser(ToolParser):
    """The tool parser (errors are InvalidArgumentError) that hides internal flags."""

    def __init__(self, *a, show_hidden=False, **kw):
        kw.setdefault("allow_abbrev", False)
        super().__init__(*a, **kw)
        self.show_hidden = show_hidden
        self.hidden_dests = set()

    def add_hidden(self, *names, **kw):
        """An internal flag: parsed like any other, listed only by --help-hidden."""
        if not self.show_hidden:
            kw["help"] = argparse.SUPPRESS
        action = self.add_argument(*names, **kw)
        self.hidden_dests.add(action.dest)
        return action


def _optionTable(parser):
    return parser._option_string_actions  # argparse's own option-string -> Action map


def _takesValues(action):
    """(min, max) number of values an option consumes; max None = unbounded."""
    n = action.nargs
    if n is None:
        return (1, 1)
    if n == argparse.OPTIONAL:
        return (0, 1)
    if n == argparse.ZERO_OR_MORE:
        return (0, None)
    if n == argparse.ONE_OR_MORE:
        return (1, None)
    if isinstance(n, int):
        return (n, n)
    return (0, 0)


def _isOption(token):
    return token.startswith("-") and token != "-" and not _NEGNUM.match(token)


def _matchOption(table, token):
    """(action, attached_value_or_None) for a known option token, else (None, None)."""
    if token in table:
        return table[token], None
    if token.startswith("--") and "=" in token:
        name, _, val = token.partition("=")
        if name in table:
            return table[name], val
        return None, None
    if not token.startswith("--"):
        if "=" in token:
            name, _, val = token.partition("=")
            if name in table:
                return table[name], val
        # short option with its value attached: -O1, -ofile.neff
        if len(token) > 2 and token[:2] in table:
            action = table[token[:2]]
            if _takesValues(action)[1] != 0:
                return action, token[2:]
    return None, None


def _looksLikeValue(token):
    return not _isOption(token) and not os.path.exists(token)


class SplitArgv:
    """Result of splitArgv: ``positionals``, ``options`` (known, as argv tokens), ``unknown``."""

    def __init__(self):
        self.positionals = []
        self.options = []
        self.unknown = []

    def normalized(self):
        """Positionals first, then the known options: the same Namespace for any input order."""
        return self.positionals + self.options


def splitArgv(parser, argv, greedy_list_values=None):
    """Split ``argv`` for ``parser`` (see module docstring).

    Options with a variable number of values (``--pipeline compile SaveTemps``)
    take the following tokens while they look like names (identifiers that are
    not existing paths), so ``--pipeline compile SaveTemps model.pb`` keeps
    ``model.pb`` as the input. An unknown ``--flag`` takes the next token as
    its value when that token is not an option and not an existing path.
    """
    table = _optionTable(parser)
    out = SplitArgv()
    i = 0
    argv = list(argv)
    while i < len(argv):
        tok = argv[i]
        if tok == "--":
            out.positionals.extend(argv[i + 1:])
            break
        if not _isOption(tok):
            out.positionals.append(tok)
            i += 1
            continue
        action, attached = _matchOption(table, tok)
        if action is None:
            unk = [tok]
            if "=" not in tok and i + 1 < len(argv) and _looksLikeValue(argv[i + 1]) and tok.startswith("--"):
                unk.append(argv[i + 1])
                i += 1
            out.unknown.append(unk)
            i += 1
            continue
        lo, hi = _takesValues(action)
        if attached is not None or hi == 0:
            out.options.append(tok)
            i += 1
            continue
        vals = []
        j = i + 1
        while j < len(argv) and (hi is None or len(vals) < hi):
            nxt = argv[j]
            if len(vals) >= lo:
                # optional extra values: only things that look like names
                if _isOption(nxt) or not _IDENT.match(nxt) or os.path.exists(nxt):
                    break
            elif _isOption(nxt) and _matchOption(table, nxt)[0] is not None:
                # a required value may start with '-' ("--x '--a --b'"), but not be one of our options
                break
            vals.append(nxt)
            j += 1
        if hi is None or hi > 1 or action.nargs in (argparse.OPTIONAL,):
            out.options.append(tok)
            out.options.extend(vals)
        else:
            # single value: attach it, so a value starting with '-' parses
            out.options.append("%s=%s" % (tok, vals[0]) if vals else tok)
        i = j
    return out


def _upper(s):
    return str(s).upper()


def _lower(s):
    return str(s).lower()


OPTLEVELS = ("0", "1", "2", "3")
TARGETS = ("inf1", "inf2", "trn1", "trn1n", "trn2", "trn2n", "trn3", "sunda")
MODEL_TYPES = ("generic", "transformer", "unet-inference", "cnn-training")
AUTO_CAST = ("none", "matmult", "matmul", "all", "fp32")
AUTO_CAST_TYPES = ("bf16", "fp16", "tf32", "fp8_e4m3")
DOWNCAST_OPS = ("dot", "scatter", "all_reduce", "reduce_scatter", "pow")


def _optlevel(value):
    v = str(value).strip()
    if v.upper().startswith("O"):
        v = v[1:]
    if v not in OPTLEVELS:
        raise argparse.ArgumentTypeError("invalid optlevel %r (choose from %s)" % (value, ", ".join(OPTLEVELS)))
    return v


def _lnc(value):
    try:
        v = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError("invalid logical NeuronCore config %r" % (value,))
    return v


def addCompileArguments(p):
    """The compile flag surface. Public flags first, then flags callers pass, then the gate flags."""
    p.add_argument("model_files", nargs="*", metavar="<model_files>",
                   help="the model to compile: an HLO module (HloModuleProto, HloProto or HLO text, "
                        "recognised by content) or a model directory")
    # -- documented flags (drop-in-contract 1.1) ----------------------------------
    p.add_argument("--framework", type=_upper, choices=("XLA",), default="XLA", help="the input framework (XLA)")
    p.add_argument("--target", type=_lower, choices=TARGETS, default="trn1",
                   help="the NeuronCore target (default trn1)")
    p.add_argument("--model-type", type=_lower, choices=MODEL_TYPES, default="generic")
    # The reference's documented default is none since neuronx-cc 2.22 (it was matmult before;
    # see penguin/autocast.py for the sources); matmult/all are applied when asked for.
    p.add_argument("--auto-cast", type=_lower, choices=AUTO_CAST, default="none")
    p.add_argument("--auto-cast-type", type=_lower, choices=AUTO_CAST_TYPES, default="bf16")
    p.add_argument("--native-int64", type=_lower, choices=("default", "enabled", "disabled"), default="default")
    p.add_argument("--implicit-integer-downcast", default="default",
                   help="default (= all), all, none, or a comma list of " + ",".join(DOWNCAST_OPS))
    p.add_argument("--distribution-strategy", choices=("llm-training", "NEMO"), default=None)
    p.add_argument("--logical-nc-config", "-lnc", "--lnc", dest="logical_nc_config", type=_lnc, default=None,
                   help="logical NeuronCore config (1 or 2; 2 is the trn2 default)")
    p.add_argument("--optlevel", "-O", dest="optlevel", type=_optlevel, default="2",
                   help="optimisation level 1, 2 (default) or 3; 0 is accepted for debugging")
    p.add_argument("--enable-mixed-precision-accumulation", dest="mixed_precision_accumulation",
                   action="store_true", default=True)
    p.add_argument("--disable-mixed-precision-accumulation", dest="mixed_precision_accumulation",
                   action="store_false")
    p.add_argument("--enable-saturate-infinity", action="store_true")
    p.add_argument("--enable-fast-context-switch", action="store_true")
    p.add_argument("--enable-fast-loading-neuron-binaries", action="store_true",
                   help="write an uncompressed NEFF")
    p.add_argument("--output", "-o", default="file.neff", help="the NEFF to write (default file.neff)")
    # -- flags seen in real callers (drop-in-contract 1.2, 1.3) ------------------
    p.add_argument("--pipeline", nargs="+", default=None, metavar="STAGE",
                   help="stages/jobs to run: compile (the whole pipeline), tensorize (up to the "
                        "tensorizer), and extra job names such as SaveTemps")
    p.add_argument("--temp-dir", default=None, help="directory for the per-compile work directory")
    p.add_argument("--tensorizer-options", default="", help="options string for the tensorizer (one argument)")
    p.add_argument("--execute-repetition", type=int, default=1)
    p.add_argument("--enable-experimental-O1", dest="enable_experimental_O1", action="store_true",
                   help="deprecated spelling of -O1")
    p.add_argument("--io-config", default=None)
    p.add_argument("--static-weights", action="store_true")
    p.add_argument("--fast-math", nargs="?", const="all", default=None)
    p.add_argument("--arch", default=None)
    p.add_argument("--jobs", "--num-parallel-jobs", dest="jobs", type=int, default=None)
    p.add_argument("--state", default=None)
    p.add_argument("--hbm-scratchpad-page-size", type=int, default=None)
    p.add_argument("--disable-dge", action="store_true")
    p.add_argument("--meta-module", action="store_true",
                   help="compile a sub-module that is linked later (single logical NeuronCore)")
    # -- internal flags (callers pass them; the gates read them) ------------------
    h = p.add_hidden
    h("--internal-tensorizer-opt-level", default=None)
    h("--internal-hlo2tensorizer-options", default="")
    h("--internal-backend-options", default="")
    h("--internal-enable-dge-levels", nargs="+", default=None)
    h("--internal-dma-order-constraints", default=None)
    h("--internal-bir-enable-sb-allocation", action="store_true")
    h("--internal-disable-fma-on-ios", action="store_true")
    h("--internal-num-neuroncores-per-sengine", type=int, default=None)
    # the rank count of a per-rank program whose HLO states none (no device_assignment, no
    # replica_count= / num_partitions= header): neuronxcc.hlo.ranks.set_rank_count
    h("--internal-num-ranks", type=int, default=None)
    h("--disable-internal-io-dge", action="store_true")
    h("--enable-internal-bir-e2e-compilation", action="store_true")
    h("--enable-internal-modular-compilation", action="store_true")
    h("--enable-internal-bir-linker", action="store_true")
    h("--layer-unroll-factor", type=int, default=1)
    h("--internal-run-standalone-legacy-compilation", action="store_true")
    h("--enable-internal-neff-wrapper", action="store_true")
    h("--enable-internal-new-backend", dest="enable_internal_new_backend", action="store_true", default=True)
    h("--disable-internal-new-backend", dest="enable_internal_new_backend", action="store_false")
    h("--internal-compile-metrics", default=None, metavar="FILE",
      help="write per-job times (and the walrus metrics) of this compile as JSON to FILE")
    h("--internal-test-crash-signal", default=None,
      help="TEST ONLY: the compile kills itself with this signal (ABRT, KILL, SEGV, INT, TERM) once its "
           "input is staged in the work dir")
    return p


def dropOptions(parser, tokens, dests):
    """``tokens`` (SplitArgv.options) without the options whose dest is in ``dests``."""
    table = _optionTable(parser)
    out = []
    skipping = False
    for tok in tokens:
        if _isOption(tok):
            action, _ = _matchOption(table, tok)
            skipping = action is not None and action.dest in dests
            if not skipping:
                out.append(tok)
        elif not skipping:
            out.append(tok)
    return out
