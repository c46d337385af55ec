"""HLO text of reducer computations that several tests write out by hand (each test keeps the
rest of its module text inline, so the program it checks stays readable in one place)."""


def torch_bool_reducer(name, op):
    """torch-xla's boolean any/all reducer: select(op(a != false, b != false), true, false),
    with ``op`` 'and' or 'or'."""
    return """%s {
  a = pred[] parameter(0)
  b = pred[] parameter(1)
  f = pred[] constant(false)
  na = pred[] compare(a, f), direction=NE
  nb = pred[] compare(b, f), direction=NE
  o = pred[] %s(na, nb)
  t = pred[] constant(true)
  ROOT r = pred[] select(o, t, f)
}
""" % (name, op)


def logaddexp_reducer(name):
    """f32 logaddexp as elementwise ops: max(x, y) + log1p(exp(-|x - y|))."""
    return """%s {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  mx = f32[] maximum(x, y)
  d = f32[] subtract(x, y)
  ad = f32[] abs(d)
  nad = f32[] negate(ad)
  e = f32[] exponential(nad)
  l = f32[] log-plus-one(e)
  ROOT r = f32[] add(mx, l)
}
""" % name
