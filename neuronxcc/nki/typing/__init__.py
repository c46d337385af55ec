"""``neuronxcc.nki.typing``: kernel parameter annotations and placeholder tensors.

``nt.tensor[shape, dtype]`` (or ``nt.tensor[[shape], dtype]``) is both an annotation and a
placeholder input for ``nki.benchmark`` (filled with random data); ``nt.mutable_tensor`` (or the annotation
``nt.tensor[nt.mutable]``, as NxD-Inference's KV-cache kernels write it) marks a parameter the kernel may write.
"""
import numpy as np

__all__ = ["tensor", "mutable_tensor", "mutable", "scalar", "TensorType"]


class _Mutable:
    """``nt.mutable``: the marker of ``nt.tensor[nt.mutable]`` (a parameter the kernel may write)."""

    def __repr__(self):
        return "nt.mutable"


mutable = _Mutable()


class TensorType:
    def __init__(self, shape, dtype=np.float32, mutable=False):
        self.shape = tuple(int(s) for s in shape)
        from neuronxcc.nki._trace.dtypes import np_dtype
        self.dtype = np_dtype(dtype)
        self.mutable = mutable

    def __repr__(self):
        return "tensor[%s, %s]" % (list(self.shape), self.dtype)


class _TensorFactory:
    def __init__(self, mutable=False):
        self.mutable = mutable

    def __getitem__(self, key):
        if not isinstance(key, tuple):
            key = (key,)
        mut = self.mutable or any(k is mutable for k in key)
        key = tuple(k for k in key if k is not mutable)
        if not key:                                   # nt.tensor[nt.mutable]: an annotation without a shape
            return _TensorFactory(mutable=mut)
        if key and isinstance(key[0], (list, tuple)):
            shape = key[0]
            dtype = key[1] if len(key) > 1 else np.float32
        else:
            ints = [k for k in key if isinstance(k, (int, np.integer))]
            rest = [k for k in key if not isinstance(k, (int, np.integer))]
            shape = ints
            dtype = rest[0] if rest else np.float32
        return TensorType(shape, dtype, mut)

    def __repr__(self):
        return "nt.mutable_tensor" if self.mutable else "nt.tensor"


tensor = _TensorFactory()
mutable_tensor = _TensorFactory(mutable=True)


class scalar:
    """Annotation of a scalar parameter."""
