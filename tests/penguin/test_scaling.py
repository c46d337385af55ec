"""Loops stay loops: the BIR of the matmul+gradient graph has no more instructions at 16000
square than at 4096, and no more at 4096 than at 1024 (compile only). At 1024 the operands fit
SBUF whole and the dots take penguin/gemm.py's kernel, whose program is longer but equally flat
in size (tests/penguin/test_gemm.py). At 4096 the matmul kernel's resident tile is loaded in
chunks (penguin/reschunk.py: a loop of chunk DMAs and a loop of K groups); at 16000 the tile is
one transfer: the count never grows with size."""
import jax
import jax.numpy as jnp
import pytest

from penguin_helpers import bir_of


def loss_and_grad(x, w):
    def loss(w):
        y = x @ w
        return jnp.sum(y * y) / y.size
    return jax.value_and_grad(loss)(w)


def count(n):
    s = jax.ShapeDtypeStruct((n, n), jnp.float32)
    mod = bir_of(loss_and_grad, s, s)
    return len(mod.instructions()), mod


def test_instruction_count_independent_of_size():
    small, m1 = count(1024)
    mid, _ = count(4096)
    big, m2 = count(16000)
    assert big <= mid <= small, (small, mid, big)
    # and the loops carry the sizes: the big module has a loop with a large trip count
    trips = [n.trip_count for n in m2.walk() if n.kind == "loop"]
    assert max(trips) >= 125
