"""``Tensor``: the value type of a traced kernel (``nki.tensor``, what ``nl.ndarray`` returns).

A ``Tensor`` is a ``view.View`` (one ``Buf`` seen through partition / free steps; the data and the
static indexing live there) plus what emits instructions: indices holding tiles (a one-element tile
becomes a register, ``registers``; an index tile an indirect access, ``indirect``), ``t[...] = u``
(``movement.assign``), ``t.T`` / ``t.astype`` / ``broadcast_to`` / ``reshape`` / ``view``, and the
Python operators, which are the ``nki.language`` functions of the same meaning (``t + u`` is
``nl.add(t, u)``: both are ``elementwise.add``). This module sits on top of the tracer's emission
modules and nothing of the tracer imports it but ``trace`` (which gives the class to the trace
context, so fresh tiles are Tensors).
"""
from neuronxcc.nki import errors as E
from neuronxcc.nki._trace import buffers, elementwise, movement, ops
from neuronxcc.nki._trace.index import Idx
from neuronxcc.nki._trace.indirect import indirect_view
from neuronxcc.nki._trace.registers import as_register
from neuronxcc.nki._trace.view import Axis, View, slice_parts
from neuronxcc.nki._trace.view import whole as _whole

__all__ = ["Tensor", "Axis", "whole", "slice_parts"]


def whole(buf):
    """The Tensor of all of BUF."""
    return _whole(buf, Tensor)


_REGISTER_ARITH = {"add": lambda a, b: a + b, "subtract": lambda a, b: a - b, "multiply": lambda a, b: a * b}


class Tensor(View):
    """See module doc. Public attributes: shape, dtype, ndim, buffer, name."""

    __slots__ = ()

    @property
    def buffer(self):
        return buffers.for_buf(self.buf)

    # -- indexing ---------------------------------------------------------------------
    def _index(self, key, keep_rank=True):
        if any(isinstance(k, View) for k in key):
            key = tuple(as_register(k, self.axes[i].size - 1 if i < len(self.axes) else None)
                        if isinstance(k, View) and k.size == 1 and (i > 0 or self.buf.onchip)
                        else k for i, k in enumerate(key))
            if any(isinstance(k, View) for k in key):
                return indirect_view(self, key)
        return View._index(self, key, keep_rank)

    def __setitem__(self, key, value):
        dst = self[key]
        if isinstance(value, Tensor) and value._updated and value.buf is self.buf:
            value._updated = False
            return
        movement.assign(dst, value)

    # -- methods --------------------------------------------------------------------------
    def broadcast_to(self, shape):
        return ops.broadcast_to(self, tuple(shape))

    def reshape(self, shape):
        return ops.reshape(self, tuple(shape))

    def view(self, dtype):
        return ops.bitcast(self, dtype)

    def ap(self, *a, **k):
        raise E.NkiNotImplementedError("tensor.ap")

    @property
    def T(self):
        return movement.nc_transpose(self)

    def astype(self, dtype):
        return movement.copy(self, dtype=dtype)

    # -- operators ---------------------------------------------------------------------
    def _bin(self, other, name, reverse=False):
        if isinstance(other, Idx) and self.size == 1 and name in _REGISTER_ARITH:
            r = as_register(self)
            return _REGISTER_ARITH[name](*((other, r) if reverse else (r, other)))
        f = getattr(elementwise, name)
        return f(other, self) if reverse else f(self, other)

    def __add__(self, o): return self._bin(o, "add")
    def __radd__(self, o): return self._bin(o, "add", True)
    def __sub__(self, o): return self._bin(o, "subtract")
    def __rsub__(self, o): return self._bin(o, "subtract", True)
    def __mul__(self, o): return self._bin(o, "multiply")
    def __rmul__(self, o): return self._bin(o, "multiply", True)
    def __truediv__(self, o): return self._bin(o, "divide")
    def __rtruediv__(self, o): return self._bin(o, "divide", True)
    def __pow__(self, o): return self._bin(o, "power")
    def __rpow__(self, o): return self._bin(o, "power", True)
    def __mod__(self, o): return self._bin(o, "mod")
    def __and__(self, o): return self._bin(o, "bitwise_and")
    def __rand__(self, o): return self._bin(o, "bitwise_and", True)
    def __or__(self, o): return self._bin(o, "bitwise_or")
    def __ror__(self, o): return self._bin(o, "bitwise_or", True)
    def __xor__(self, o): return self._bin(o, "bitwise_xor")
    def __lshift__(self, o): return self._bin(o, "left_shift")
    def __rshift__(self, o): return self._bin(o, "right_shift")
    def __lt__(self, o): return self._bin(o, "less")
    def __le__(self, o): return self._bin(o, "less_equal")
    def __gt__(self, o): return self._bin(o, "greater")
    def __ge__(self, o): return self._bin(o, "greater_equal")
    def __eq__(self, o): return self._bin(o, "equal")
    def __ne__(self, o): return self._bin(o, "not_equal")
    __hash__ = object.__hash__

    def __neg__(self):
        return elementwise.negative(self)

    def __invert__(self):
        return elementwise.invert(self)

    def __abs__(self):
        return elementwise.abs(self)

    def _inplace(self, o, op):
        ops.update_inplace(self, o, op)
        self._updated = True
        return self

    def __iadd__(self, o): return self._inplace(o, "add")
    def __isub__(self, o): return self._inplace(o, "subtract")
    def __imul__(self, o): return self._inplace(o, "mult")
    def __itruediv__(self, o): return self._inplace(o, "divide")
    def __imax__(self, o): return self._inplace(o, "max")
