"""The compiler's one error hierarchy.

Every error a user can cause is a ``CompilerError`` subclass carrying an
``NCC_<XXXX><nnn>`` code. The driver logs the traceback to the log file and
prints exactly one line, ``[<code>] <message>``, then exits with status 70
(``os.EX_SOFTWARE``). Internal errors (bugs, layers not built yet) carry the
``[INTERNAL_ERROR]`` tag in front of their code.
"""

SUPPORT_URL = "https://github.com/aws-neuron/aws-neuron-sdk/issues/new"


class CompilerError(Exception):
    """Base class. ``code`` is the NCC_ code; ``internal`` marks compiler bugs."""

    code = "NCC_EGEN001"
    internal = False

    def __init__(self, message, code=None):
        super().__init__(message)
        self.message = str(message)
        if code is not None:
            self.code = code

    def one_line(self):
        """The single console line for this error (no newline, no traceback)."""
        msg = " ".join(self.message.split("\n")[0:1]) if self.message else type(self).__name__
        tag = "[INTERNAL_ERROR] " if self.internal else ""
        return "%s[%s] %s" % (tag, self.code, msg)

    def __str__(self):
        return self.message


class CompilerInvalidInputException(CompilerError):
    """Bad user input: flags, files, unknown names (the seeds' name)."""

    code = "NCC_EARG001"


class InvalidArgumentError(CompilerInvalidInputException):
    code = "NCC_EARG002"


class InputFileError(CompilerInvalidInputException):
    """A missing, empty, truncated or corrupt input file."""

    code = "NCC_EINP001"


class HloParseError(InputFileError):
    """HLO bytes or text that cannot be read; text errors carry line and column."""

    code = "NCC_EHLO001"

    def __init__(self, message, line=None, column=None, code=None):
        if line is not None:
            message = "%s (line %d%s)" % (message, line, ", column %d" % column if column is not None else "")
        super().__init__(message, code)
        self.line = line
        self.column = column


class HloVerifyError(CompilerInvalidInputException):
    """A module that reads but does not make sense (shapes disagree, missing parameter)."""

    code = "NCC_EVRF002"


class UnsupportedOperatorError(CompilerInvalidInputException):
    """An HLO op outside the supported table (see ``neuronx-cc list-operators``)."""

    code = "NCC_EVRF001"


class IntegerDowncastError(CompilerInvalidInputException):
    """A 64-bit integer op the target computes in 32 bits, refused by --implicit-integer-downcast."""

    code = "NCC_EVRF035"


class UnknownCustomCallError(UnsupportedOperatorError):
    code = "NCC_EVRF015"


class NkiCustomCallError(UnsupportedOperatorError):
    """An NKI kernel custom-call (AwsNeuronCustomNativeKernel) whose backend_config this compiler
    cannot read (e.g. a kernel serialized by the closed neuronx-cc) or that does not fit its operands."""

    code = "NCC_ENKC001"


class TensorTooLargeError(CompilerInvalidInputException):
    """A tensor that cannot be materialised or does not fit the target's HBM."""

    code = "NCC_EOOM001"


class EvaluationLimitError(CompilerInvalidInputException):
    """The reference interpreter stopped a program that ran past a work limit
    (e.g. a while loop that does not end on the golden inputs)."""

    code = "NCC_EVRF020"


class OutOfMemoryError(CompilerError):
    """On-chip memory (SBUF/PSUM) exhausted and spilling could not help."""

    code = "NCC_EOOM002"


class NeffFormatError(InputFileError):
    """A NEFF whose header or members are malformed or unsafe."""

    code = "NCC_ENEF001"


class InternalCompilerError(CompilerError):
    code = "NCC_INLA001"
    internal = True

    def one_line(self):
        return "%s - Please open a support ticket at %s" % (super().one_line(), SUPPORT_URL)


class NotBuiltYetError(InternalCompilerError):
    """A pipeline layer this reimplementation has not built yet.

    Raised instead of writing any artifact, so nothing made up ever reaches
    the output.
    """

    code = "NCC_INBY001"


class NumericalMismatchError(InternalCompilerError):
    """The bir_sim check found the compiled program disagrees with the goldens."""

    code = "NCC_IBSM001"


def source_location(metadata):
    """Format ``file:line`` from an HLO op's metadata dict/object, or ''."""
    if metadata is None:
        return ""
    get = metadata.get if isinstance(metadata, dict) else (lambda k, d=None: getattr(metadata, k, d))
    fname = get("source_file", "") or ""
    line = get("source_line", 0) or 0
    if not fname:
        return ""
    return "%s:%d" % (fname, line) if line else fname


def location(instruction, computation=None, source=None):
    """The one location format of the messages that name an op: ``instruction NAME[ in
    computation COMP][ at FILE:LINE]``. ``source`` is ``file:line`` text or HLO metadata."""
    s = "instruction %s" % instruction
    if computation:
        s += " in computation %s" % computation
    src = source if isinstance(source, str) else source_location(source)
    if src:
        s += " at %s" % src
    return s


def unsupported(op, where="", why=None, hint=None, cls=None, prefix="Unsupported operator"):
    """The one "cannot lower / unsupported" error (returned, not raised):
    ``PREFIX 'OP' (WHERE): WHY; HINT``, WHERE from ``location``; ``cls`` defaults to
    UnsupportedOperatorError (NCC_EVRF001)."""
    msg = "%s '%s'" % (prefix, op)
    if where:
        msg += " (%s)" % where
    if why:
        msg += ": %s" % why
    if hint:
        msg += "; %s" % hint
    return (cls or UnsupportedOperatorError)(msg)


def unsupported_inst(inst, why=None, computation=None, hint=None, cls=None, prefix="Unsupported operator"):
    """``unsupported`` for HLO instruction ``inst``: its opcode, and its name, ``computation``
    (an object with ``name``, or a name) and source line from its metadata in the ``location``
    format."""
    comp = getattr(computation, "name", computation)
    return unsupported(inst.opcode, location(inst.name, comp, getattr(inst, "metadata", None)), why, hint,
                       cls, prefix)


class LoweringError(UnsupportedOperatorError):
    """An op the Penguin backend cannot lower (yet)."""

    code = "NCC_EPEN001"


def cannot_lower(op, where="", why=None):
    """``Cannot lower 'OP' (WHERE): WHY`` as a LoweringError (NCC_EPEN001): ``unsupported`` for an
    op of the Penguin IR, WHERE in the ``location`` format."""
    return unsupported(op, where, why, cls=LoweringError, prefix="Cannot lower")


class CustomOpError(CompilerError):
    """Custom-op staging/registry errors: library version conflicts, the
    FunctionId cap, functions bound to an unregistered library, a missing
    custom-op data directory."""

    code = "NCC_ECOP001"


class BirFormatError(InputFileError):
    """A BIR JSON file (or NEFF engine stream) that cannot be read as BIR."""

    code = "NCC_EBIR001"


class BirVerifyError(InternalCompilerError):
    """A BIR module that breaks a machine rule (partitions, PSUM banks, engine/memory
    legality, dtypes, bounds). Generated BIR failing it is a compiler bug."""

    code = "NCC_IBIR001"


class BirSimError(InternalCompilerError):
    """birsim could not execute a BIR program (out-of-bounds access at run time,
    unsatisfiable semaphore wait, unknown register, runaway While)."""

    code = "NCC_IBSM002"


class CollectiveError(CompilerError):
    """Ranks of a multi-rank program that cannot meet: a collective some rank never
    reaches, members that disagree on shape, dtype or groups (NCC_ECCL001), or
    replica groups / source-target pairs that do not fit the rank count (NCC_ECCL002)."""

    code = "NCC_ECCL001"
