"""--auto-cast / --auto-cast-type / --fast-math: which fp32 operations run in a narrower type.

As the reference's public CLI documentation defines them (Neuron Compiler CLI
Reference Guide (neuronx-cc); "Mixed Precision and Performance-accuracy
Tuning (neuronx-cc)"):

  --auto-cast none (the default) leaves every type as the model defines it;
  --auto-cast matmult ("matmul" is the same) casts only the fp32 operations
      that use the matrix-multiplication engine (dot, convolution) to the
      --auto-cast-type; the PE accumulates in fp32 (PSUM) and the result keeps
      its fp32 type;
  --auto-cast all casts every fp32 operation (elementwise math too; reductions
      keep their fp32 partial sums);
  --auto-cast-type bf16 (default), fp16, tf32 or fp8_e4m3 (Neuron's FP8_EXP4,
      range +-240).
  --auto-cast fp32 is accepted by the driver but is in none of the reference's
      public pages (CLI reference 2.3 to 2.32, mixed-precision guide, release
      notes) and no public caller passes it. Here it means what it says, the
      opposite direction of the other modes: elementwise math the model states
      in a narrower float type (bf16, fp16, fp8) is computed in fp32 tiles on
      chip, so chains of such operations round once, where they are stored;
      stored tensors, matmul operands (their products are exact in the fp32
      PSUM anyway) and fp32 operations keep their types. --auto-cast-type does
      not apply to it.
  Input and output tensors keep the types the framework asked for: casts
  happen on chip (the DMA that loads an fp32 operand writes the narrow type).

Why the default is none: the reference's default was matmult up to neuronx-cc
2.21 (Neuron SDK 2.26); its 2.22 release (SDK 2.27, December 2025) changed it
to none ("to improve accuracy"; callers who want the old behaviour pass
--auto-cast=matmult), and the CLI reference and the mixed-precision guide say
none since. This compiler reports version 2.24, and the frameworks (NxD, NxDI,
optimum-neuron, ZML) pass --auto-cast=none explicitly anyway. A user who wants
the PE's low-precision rate on an fp32 model asks for matmult.

--fast-math is not in neuronx-cc's public CLI reference (a hidden flag there);
it is neuron-cc's (Inf1) option, which replaced its --fp32-cast and which
neuronx-cc's --auto-cast / --auto-cast-type in turn replace. Callers still pass
it, so it maps onto the same two settings as neuron-cc's documentation defines
the values: ``all`` =
fp32-cast-all + fast-relayout (every fp32 op to bf16), ``none`` =
fp32-cast-matmult-bf16 + no-fast-relayout, ``fp32-cast-all`` (bf16),
``fp32-cast-all-fp16``, ``fp32-cast-matmult`` / ``fp32-cast-matmult-bf16``
(bf16), ``fp32-cast-matmult-fp16``; ``fast-relayout`` / ``no-fast-relayout``
choose whether PE transposes of fp32 data may run in the narrow type (ours
always run in the matmul's operand type, so they follow the cast). When both
are given, --fast-math's casting choice wins (it is the more specific
request). Note that ``none`` there still casts matmuls to bf16 (neuron-cc's
most accurate setting), so ``--fast-math none`` is not ``--auto-cast none``.

tf32 is BIR's ``tfloat32`` (1-8-10 held in 32 bits; common.dtypes.round_tf32 and
birsim's encoder round to it, RNE): the operand DMAs write it, the PE runs it at
its low-precision rate; under ``all`` elementwise results are rounded to it.
"""
from dataclasses import dataclass, field

from neuronxcc.common import dtypes as _dt
from neuronxcc.errors import InvalidArgumentError

__all__ = ["CastPolicy", "policy", "TYPE_NAMES"]

# --auto-cast-type spelling -> the BIR type it names (the registry's)
TYPE_NAMES = {t: _dt.by_name(t).name for t in _dt.AUTO_CAST_TYPES}
_FAST_MATH = {
    "all": ("all", "bf16", True),
    "none": ("matmult", "bf16", False),
    "fp32-cast-all": ("all", "bf16", None),
    "fp32-cast-all-fp16": ("all", "fp16", None),
    "fp32-cast-matmult": ("matmult", "bf16", None),
    "fp32-cast-matmult-bf16": ("matmult", "bf16", None),
    "fp32-cast-matmult-fp16": ("matmult", "fp16", None),
}


@dataclass
class CastPolicy:
    mode: str = "none"            # none | matmult | all | fp32
    type_flag: str = "bf16"       # the --auto-cast-type spelling
    fast_relayout: bool = True
    counts: dict = field(default_factory=dict)     # what was cast: kind -> number of operations

    @property
    def dtype(self):
        """The type cast operations compute in: the --auto-cast-type, or float32 under fp32."""
        return "float32" if self.mode == "fp32" else TYPE_NAMES[self.type_flag]

    @property
    def matmult(self):
        return self.mode in ("matmult", "all")

    @property
    def all(self):
        return self.mode == "all"

    @property
    def upcast(self):
        """--auto-cast fp32: elementwise math of narrower float types computed in fp32."""
        return self.mode == "fp32"

    def count(self, kind, n=1):
        self.counts[kind] = self.counts.get(kind, 0) + n

    def report(self):
        """One line naming every cast inserted in this compile, or '' when none was."""
        if not self.counts:
            return ""
        what = {"matmult": ("matrix multiplication", " (dot/convolution; fp32 accumulation, fp32 result)"),
                "elementwise": ("elementwise operation", "")}
        parts = []
        for k, n in sorted(self.counts.items()):
            noun, note = what.get(k, (k, ""))
            parts.append("%d %s%s%s" % (n, noun, "" if n == 1 else "s", note))
        if self.upcast:
            return ("Auto-cast (--auto-cast fp32): computed %s of bf16/fp16/fp8 type in fp32 on chip (the "
                    "stored tensors keep the model's types)" % " and ".join(parts))
        return "Auto-cast (--auto-cast %s --auto-cast-type %s): cast %s from fp32 to %s" % (
            self.mode, self.type_flag, " and ".join(parts), self.type_flag)

    def as_attrs(self):
        return {"mode": self.mode, "type": self.type_flag, "dtype": self.dtype if self.mode != "none" else None,
                "counts": dict(self.counts)}


def policy(options):
    """The CastPolicy of a compile's options (argparse namespace or dict); none when absent, so a
    library caller without options keeps every type."""
    get = (options.get if isinstance(options, dict) else (lambda k, d=None: getattr(options, k, d))) \
        if options is not None else (lambda k, d=None: d)
    mode = (get("auto_cast") or "none").lower()
    typ = (get("auto_cast_type") or "bf16").lower()
    if mode == "matmul":
        mode = "matmult"
    fast = True
    fm = get("fast_math")
    if fm:
        for tok in str(fm).replace(",", " ").split():
            tok = tok.lower()
            if tok == "fast-relayout":
                fast = True
            elif tok == "no-fast-relayout":
                fast = False
            elif tok in _FAST_MATH:
                mode, typ, relayout = _FAST_MATH[tok]
                if relayout is not None:
                    fast = relayout
            else:
                raise InvalidArgumentError("--fast-math: unknown value %r (all, none, fp32-cast-all, "
                                           "fp32-cast-all-fp16, fp32-cast-matmult, fp32-cast-matmult-bf16, "
                                           "fp32-cast-matmult-fp16, fast-relayout, no-fast-relayout)" % tok)
    if mode not in ("none", "matmult", "all", "fp32"):
        raise InvalidArgumentError("--auto-cast: unknown mode %r (none, matmult, all, fp32)" % mode)
    if typ not in TYPE_NAMES:
        raise InvalidArgumentError("--auto-cast-type: unknown type %r (%s)" % (typ, ", ".join(TYPE_NAMES)))
    return CastPolicy(mode, typ, fast)
