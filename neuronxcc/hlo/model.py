"""The HLO module model: HloModule, HloComputation, HloInstruction, Shape.

Both readers (proto_io, text_parser) build this model and both writers read
it, so one module reads the same from either form. Invariants:

- ``Shape``: arrays always carry a layout (minor-to-major tuple; the default
  major-to-minor one when the input gave none, ``()`` for scalars); tuples and
  tokens carry ``layout=None``. dims and layout are tuples of ints.
- ``HloComputation.instructions`` lists operands before users; names are
  unique in the module.
- ``HloInstruction.attrs`` holds the op's attributes under their HLO text
  names, parsed (see ``ATTR_DEFAULTS``: an op's structured attributes are
  always present, filled with XLA's defaults when the input omitted them).
  Computations named by attributes (to_apply, body, ...) are HloComputation
  objects, also listed in ``called_computations`` in XLA's order.
"""
import collections

import numpy as np

from neuronxcc.errors import HloVerifyError, TensorTooLargeError, source_location

from neuronxcc.common import dtypes as _dtypes

# element type name -> numpy dtype (the HLO view of the one element-type registry)
_DTYPES = _dtypes.hlo_numpy()
ARRAY_TYPES = frozenset(_DTYPES)
ELEMENT_TYPES = ARRAY_TYPES | {"tuple", "token", "opaque"}

# The largest constant a reader materialises (bytes). Bigger literals raise
# TensorTooLargeError instead of exhausting memory.
MAX_LITERAL_BYTES = 4 << 30
# The most dimensions one array shape may have (numpy arrays hold at most 64).
MAX_RANK = 64


def dtype_of(element_type):
    """numpy dtype of an array element type name ('f32', 'bf16', ...)."""
    try:
        return _DTYPES[element_type]
    except KeyError:
        raise HloVerifyError("element type %s has no array representation" % element_type) from None


def element_type_of(dtype):
    """HLO element type name of a numpy dtype (inverse of ``dtype_of``)."""
    dtype = np.dtype(dtype)
    for name, dt in _DTYPES.items():
        if dt == dtype:
            return name
    raise HloVerifyError("numpy dtype %s has no HLO element type" % dtype)


class Shape:
    """An array, tuple or token shape."""

    __slots__ = ("element_type", "dims", "tuple_shapes", "layout", "dynamic_dims")

    def __init__(self, element_type, dims=(), tuple_shapes=None, layout=None, dynamic_dims=None):
        if element_type not in ELEMENT_TYPES:
            raise HloVerifyError("unknown element type %r" % (element_type,))
        self.element_type = element_type
        if element_type == "tuple":
            self.dims = ()
            self.tuple_shapes = tuple(tuple_shapes or ())
            self.layout = None
            self.dynamic_dims = None
            return
        self.tuple_shapes = ()
        if element_type in ("token", "opaque"):
            self.dims, self.layout, self.dynamic_dims = (), None, None
            return
        self.dims = tuple(int(d) for d in dims)
        for d in self.dims:
            if d < 0:
                raise HloVerifyError("negative dimension in shape %s%s" % (element_type, list(self.dims)))
        if len(self.dims) > MAX_RANK:
            raise HloVerifyError("shape %s[...] has rank %d; at most %d dimensions are supported"
                                 % (element_type, len(self.dims), MAX_RANK))
        rank = len(self.dims)
        if layout is None:
            layout = tuple(range(rank - 1, -1, -1))
        self.layout = tuple(int(x) for x in layout)
        if sorted(self.layout) != list(range(rank)):
            raise HloVerifyError("layout {%s} is not a permutation of the %d dimensions of %s"
                                 % (",".join(map(str, self.layout)), rank, element_type))
        self.dynamic_dims = tuple(bool(x) for x in dynamic_dims) if dynamic_dims and any(dynamic_dims) else None
        if self.dynamic_dims is not None and len(self.dynamic_dims) != rank:
            raise HloVerifyError("is_dynamic_dimension has the wrong length")

    # -- constructors -------------------------------------------------------
    @classmethod
    def array(cls, element_type, dims, layout=None):
        return cls(element_type, dims, layout=layout)

    @classmethod
    def tuple_of(cls, shapes):
        return cls("tuple", tuple_shapes=shapes)

    @classmethod
    def token(cls):
        return cls("token")

    @classmethod
    def of_array(cls, arr):
        return cls(element_type_of(arr.dtype), arr.shape)

    # -- queries -------------------------------------------------------------
    @property
    def is_tuple(self):
        return self.element_type == "tuple"

    @property
    def is_token(self):
        return self.element_type == "token"

    @property
    def is_array(self):
        return self.element_type in ARRAY_TYPES

    @property
    def rank(self):
        return len(self.dims)

    def numel(self):
        n = 1
        for d in self.dims:
            n *= d
        return n

    def numpy_dtype(self):
        return dtype_of(self.element_type)

    def nbytes(self):
        """Bytes of all array leaves (0 for tokens)."""
        if self.is_tuple:
            return sum(s.nbytes() for s in self.tuple_shapes)
        if not self.is_array:
            return 0
        return self.numel() * dtype_of(self.element_type).itemsize

    def leaves(self):
        """Array/token leaves in flattened (pre-order) result order."""
        if self.is_tuple:
            out = []
            for s in self.tuple_shapes:
                out.extend(s.leaves())
            return out
        return [self]

    def with_layout(self, layout):
        return Shape(self.element_type, self.dims, self.tuple_shapes, layout, self.dynamic_dims)

    def _key(self):
        return (self.element_type, self.dims, tuple(s._key() for s in self.tuple_shapes), self.layout,
                self.dynamic_dims)

    def __eq__(self, other):
        return isinstance(other, Shape) and self._key() == other._key()

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash(self._key())

    def same_dims(self, other):
        """Equal ignoring layouts."""
        if self.is_tuple or other.is_tuple:
            return (self.is_tuple and other.is_tuple and len(self.tuple_shapes) == len(other.tuple_shapes)
                    and all(a.same_dims(b) for a, b in zip(self.tuple_shapes, other.tuple_shapes)))
        return self.element_type == other.element_type and self.dims == other.dims

    def to_text(self, layout=True):
        if self.is_tuple:
            return "(%s)" % ", ".join(s.to_text(layout) for s in self.tuple_shapes)
        if not self.is_array:  # token[] / opaque[]
            return self.element_type + "[]"
        dyn = self.dynamic_dims or (False,) * len(self.dims)
        dims = ",".join(("<=%d" if dd else "%d") % d for d, dd in zip(self.dims, dyn))
        s = "%s[%s]" % (self.element_type, dims)
        if layout and self.dims:
            s += "{%s}" % ",".join(map(str, self.layout))
        return s

    __str__ = to_text

    def __repr__(self):
        return "Shape(%s)" % self.to_text()


# -- structured attribute values ---------------------------------------------

WindowDim = collections.namedtuple(
    "WindowDim", "size stride padding_low padding_high window_dilation base_dilation window_reversal")
WindowDim.__new__.__defaults__ = (1, 0, 0, 1, 1, False)


class ConvDims(collections.namedtuple("ConvDims", [
        "input_batch_dimension", "input_feature_dimension", "input_spatial_dimensions",
        "kernel_input_feature_dimension", "kernel_output_feature_dimension", "kernel_spatial_dimensions",
        "output_batch_dimension", "output_feature_dimension", "output_spatial_dimensions"])):
    """Convolution dimension numbers (field names as in XLA's proto)."""

    __slots__ = ()

    def to_text(self):
        """``dim_labels`` form, e.g. ``b01f_01io->b01f``."""
        def labels(rank, fixed, spatial):
            out = ["?"] * rank
            for ch, d in fixed:
                out[d] = ch
            for k, d in enumerate(spatial):
                out[d] = str(k)
            return "".join(out)
        n = len(self.input_spatial_dimensions) + 2
        return "%s_%s->%s" % (
            labels(n, (("b", self.input_batch_dimension), ("f", self.input_feature_dimension)),
                   self.input_spatial_dimensions),
            labels(n, (("i", self.kernel_input_feature_dimension), ("o", self.kernel_output_feature_dimension)),
                   self.kernel_spatial_dimensions),
            labels(n, (("b", self.output_batch_dimension), ("f", self.output_feature_dimension)),
                   self.output_spatial_dimensions))

    __str__ = to_text


def default_compare_type(instr):
    if not instr.operands:
        return "FLOAT"
    et = instr.operands[0].shape.element_type
    if et.startswith("f") or et.startswith("bf") or et.startswith("c"):
        return "FLOAT"
    if et.startswith("s"):
        return "SIGNED"
    return "UNSIGNED"


# opcode -> {attr: default}. After reading, every listed attribute is present.
ATTR_DEFAULTS = {
    "dot": {"lhs_batch_dims": (), "rhs_batch_dims": (), "lhs_contracting_dims": (),
            "rhs_contracting_dims": (), "operand_precision": ()},
    "convolution": {"window": (), "feature_group_count": 1, "batch_group_count": 1, "operand_precision": ()},
    "gather": {"operand_batching_dims": (), "start_indices_batching_dims": (), "indices_are_sorted": False},
    "scatter": {"input_batching_dims": (), "scatter_indices_batching_dims": (), "indices_are_sorted": False,
                "unique_indices": False},
    "sort": {"is_stable": False},
    "custom-call": {"api_version": "API_VERSION_ORIGINAL", "custom_call_has_side_effect": False},
    "reduce-window": {},
    "select-and-scatter": {},
    "pad": {},
    "broadcast": {"dimensions": ()},
    "transpose": {"dimensions": ()},
    "reverse": {"dimensions": ()},
    "reduce": {"dimensions": ()},
    "concatenate": {"dimensions": ()},
    "map": {"dimensions": ()},
    "rng-bit-generator": {"algorithm": "rng_default"},
    "cholesky": {"lower": False},
    "triangular-solve": {"left_side": False, "lower": False, "unit_diagonal": False, "transpose_a": "NO_TRANSPOSE"},
}


# ops whose proto ``dimensions`` field prints as dimensions={...}
DIMS_OPS = frozenset(("broadcast", "transpose", "reverse", "reduce", "concatenate", "map", "sort",
                      "all-gather", "all-gather-start", "reduce-scatter", "all-to-all"))


def fill_attr_defaults(instr):
    defaults = ATTR_DEFAULTS.get(instr.opcode)
    if defaults:
        for k, v in defaults.items():
            instr.attrs.setdefault(k, v)
    if instr.opcode in DIMS_OPS:
        instr.attrs.setdefault("dimensions", ())
    if instr.opcode == "compare":
        if not instr.attrs.get("type"):
            instr.attrs["type"] = default_compare_type(instr)
    if instr.opcode == "conditional" and "branch_computations" not in instr.attrs:
        instr.attrs["branch_computations"] = list(instr.called_computations)


# opcode -> names of its called-computation attributes, in called_computations order
CALLED_ATTRS = {
    "while": ("body", "condition"),
    "select-and-scatter": ("select", "scatter"),
    "fusion": ("calls",),
    "async-start": ("calls",),
}
TO_APPLY_OPS = frozenset(("reduce", "reduce-window", "map", "sort", "scatter", "call", "all-reduce",
                          "all-reduce-start", "reduce-scatter"))


def assign_called_attrs(instr):
    """Set the named attributes (to_apply, body, ...) from called_computations."""
    cc = instr.called_computations
    if not cc:
        return
    op = instr.opcode
    if op in CALLED_ATTRS:
        for name, comp in zip(CALLED_ATTRS[op], cc):
            instr.attrs[name] = comp
    elif op == "conditional":
        instr.attrs["branch_computations"] = list(cc)
    elif op in TO_APPLY_OPS and len(cc) == 1:
        instr.attrs["to_apply"] = cc[0]
    else:
        instr.attrs["called_computations"] = list(cc)


class HloInstruction:
    """One HLO instruction. ``opcode`` is spelled as in HLO text."""

    __slots__ = ("name", "opcode", "shape", "operands", "attrs", "called_computations", "literal",
                 "parameter_number", "metadata", "frontend_attributes", "control_predecessors", "id",
                 "parent")

    def __init__(self, name, opcode, shape, operands=(), attrs=None, called_computations=(), literal=None,
                 parameter_number=None, metadata=None, frontend_attributes=None, control_predecessors=(),
                 id=None):
        self.name = name
        self.opcode = opcode
        self.shape = shape
        self.operands = list(operands)
        self.attrs = dict(attrs or {})
        self.called_computations = list(called_computations)
        self.literal = literal
        self.parameter_number = parameter_number
        self.metadata = dict(metadata or {})
        self.frontend_attributes = dict(frontend_attributes or {})
        self.control_predecessors = list(control_predecessors)
        self.id = id
        self.parent = None

    @property
    def is_root(self):
        return self.parent is not None and self.parent.root is self

    @property
    def backend_config(self):
        """backend_config as bytes (the attribute holds it as a str, surrogateescape'd)."""
        v = self.attrs.get("backend_config", "")
        return v.encode("utf-8", "surrogateescape") if isinstance(v, str) else bytes(v)

    @property
    def custom_call_target(self):
        return self.attrs.get("custom_call_target")

    def source_location(self):
        """``file:line`` from metadata, or ''."""
        return source_location(self.metadata)

    def __repr__(self):
        return "<HloInstruction %s = %s %s>" % (self.name, self.shape, self.opcode)


class HloComputation:
    """A computation: instructions in operand-before-user order and a root."""

    def __init__(self, name, instructions=(), root=None, is_fusion=False, execution_thread=""):
        self.name = name
        self.instructions = list(instructions)
        self.root = root if root is not None else (self.instructions[-1] if self.instructions else None)
        self.is_fusion = is_fusion
        self.execution_thread = execution_thread
        self.id = None
        for i in self.instructions:
            i.parent = self

    @property
    def parameters(self):
        ps = [i for i in self.instructions if i.opcode == "parameter"]
        return sorted(ps, key=lambda i: i.parameter_number)

    @property
    def parameter_shapes(self):
        return [p.shape for p in self.parameters]

    @property
    def result_shape(self):
        return self.root.shape

    def instruction(self, name):
        for i in self.instructions:
            if i.name == name:
                return i
        raise KeyError(name)

    def add(self, instr):
        instr.parent = self
        self.instructions.append(instr)
        return instr

    def users(self):
        """dict instruction -> list of users within this computation."""
        out = {i: [] for i in self.instructions}
        for i in self.instructions:
            for o in i.operands:
                if o in out:
                    out[o].append(i)
        return out

    def __repr__(self):
        return "<HloComputation %s (%d instructions)>" % (self.name, len(self.instructions))


class HloModule:
    """A module: computations (callees before callers) and the entry."""

    def __init__(self, name, computations, entry, frontend_attributes=None, input_output_alias=(),
                 replica_count=None, num_partitions=None):
        self.name = name
        self.computations = collections.OrderedDict((c.name, c) for c in computations)
        self.entry = entry if isinstance(entry, HloComputation) else self.computations[entry]
        if self.entry.name not in self.computations:
            self.computations[self.entry.name] = self.entry
        self.frontend_attributes = dict(frontend_attributes or {})
        # [(output_shape_index tuple, parameter_number, parameter_shape_index tuple, kind str)]
        self.input_output_alias = list(input_output_alias)
        # the rank count when the input states one (text header replica_count= / num_partitions=,
        # the proto's device_assignment); None = not stated (neuronxcc.hlo.ranks infers it)
        self.replica_count = int(replica_count) if replica_count else None
        self.num_partitions = int(num_partitions) if num_partitions else None
        # from a model directory: weight name -> array, and parameter number -> weight name
        self.weights = {}
        self.weight_parameters = {}

    def instructions(self):
        for c in self.computations.values():
            yield from c.instructions

    @property
    def parameter_shapes(self):
        return self.entry.parameter_shapes

    @property
    def result_shape(self):
        return self.entry.root.shape

    def entry_computation_layout(self):
        return "(%s)->%s" % (", ".join(s.to_text() for s in self.parameter_shapes), self.result_shape.to_text())

    def computation_order(self):
        """Every computation once, callees before callers, the entry last (iterative post-order)."""
        seen, order = set(), []

        def visit(root):
            if root in seen:
                return
            seen.add(root)
            stack = [(root, iter([cc for i in root.instructions for cc in i.called_computations]))]
            while stack:
                comp, it = stack[-1]
                nxt = next(it, None)
                if nxt is None:
                    order.append(comp)
                    stack.pop()
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, iter([cc for i in nxt.instructions for cc in i.called_computations])))
        for c in self.computations.values():
            if c is not self.entry:
                visit(c)
        visit(self.entry)
        if order[-1] is not self.entry:
            order.remove(self.entry)
            order.append(self.entry)
        return order

    def verify(self):
        from neuronxcc.hlo.verifier import verify_module
        verify_module(self)
        return self

    def __repr__(self):
        return "<HloModule %s entry=%s (%d computations)>" % (self.name, self.entry.name, len(self.computations))


def check_literal_size(shape, what="constant"):
    """Raise TensorTooLargeError when materialising ``shape`` would exceed the limit."""
    n = shape.nbytes()
    if n > MAX_LITERAL_BYTES:
        raise TensorTooLargeError("%s of shape %s needs %d bytes, more than the %d-byte limit for a literal"
                                  % (what, shape.to_text(layout=False), n, MAX_LITERAL_BYTES))
