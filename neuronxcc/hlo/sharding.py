"""OpSharding <-> its HLO text form (``{replicated}``, ``{devices=[2,1]0,1}``, ...).

This compiler runs one NeuronCore per program, so shardings are only carried
through (read, kept as text in ``attrs['sharding']``, written back), never
acted on. ``from_text`` returns None for a form it does not know; the
sharding is then dropped when writing a proto.
"""
import re

from neuronxcc.hlo import schema

_TYPE_NAMES = {0: "replicated", 1: "maximal", 4: "manual", 5: "unknown", 6: "unreduced"}


def to_text(sp, depth=0):
    """Text form of an OpSharding message, braces included."""
    if depth > 32:
        return "{replicated}"
    t = sp.type
    if t == 2:  # TUPLE
        return "{%s}" % ", ".join(to_text(s, depth + 1) for s in sp.tuple_shardings)
    if t == 1 and len(sp.tile_assignment_devices):
        return "{maximal device=%d}" % sp.tile_assignment_devices[0]
    if t == 3:  # OTHER: tiled
        dims = ",".join(map(str, sp.tile_assignment_dimensions))
        if len(sp.iota_reshape_dims):
            devs = "<=[%s]" % ",".join(map(str, sp.iota_reshape_dims))
            perm = list(sp.iota_transpose_perm)
            if perm and perm != list(range(len(perm))):
                devs += "T(%s)" % ",".join(map(str, perm))
        else:
            devs = ",".join(map(str, sp.tile_assignment_devices))
        s = "devices=[%s]%s" % (dims, devs)
        if sp.replicate_on_last_tile_dim:
            s += " last_tile_dim_replicate"
        if len(sp.last_tile_dims):
            s += " last_tile_dims={%s}" % ", ".join(_TYPE_NAMES.get(x, "replicated") for x in sp.last_tile_dims)
        return "{%s}" % s
    return "{%s}" % _TYPE_NAMES.get(t, "replicated")


def _split_top(s):
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch in "{[(":
            depth += 1
        elif ch in "}])":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    return [p.strip() for p in parts]


def from_text(text, depth=0):
    """OpSharding message from its text form, or None when the form is not known."""
    s = text.strip()
    if not (s.startswith("{") and s.endswith("}")) or depth > 32:
        return None
    inner = s[1:-1].strip()
    sp = schema.OpSharding()
    if inner.startswith("{") or inner == "":
        sp.type = 2
        for part in _split_top(inner):
            sub = from_text(part, depth + 1)
            if sub is None:
                return None
            sp.tuple_shardings.add().CopyFrom(sub)
        return sp
    words = inner.split()
    if words[0] in ("replicated", "manual", "unknown", "unreduced"):
        sp.type = {"replicated": 0, "manual": 4, "unknown": 5, "unreduced": 6}[words[0]]
        return sp
    m = re.match(r"maximal device=(\d+)", inner)
    if m:
        sp.type = 1
        sp.tile_assignment_dimensions.append(1)
        sp.tile_assignment_devices.append(int(m.group(1)))
        return sp
    m = re.match(r"devices=\[([\d,]+)\]\s*(<=\[([\d,]+)\](T\(([\d,]+)\))?|[\d,]+)(.*)$", inner)
    if not m:
        return None
    sp.type = 3
    sp.tile_assignment_dimensions.extend(int(x) for x in m.group(1).split(","))
    if m.group(3):
        sp.iota_reshape_dims.extend(int(x) for x in m.group(3).split(","))
        if m.group(5):
            sp.iota_transpose_perm.extend(int(x) for x in m.group(5).split(","))
        else:
            sp.iota_transpose_perm.extend(range(len(sp.iota_reshape_dims)))
    else:
        sp.tile_assignment_devices.extend(int(x) for x in m.group(2).split(","))
    rest = m.group(6)
    if "last_tile_dim_replicate" in rest:
        sp.replicate_on_last_tile_dim = True
    m2 = re.search(r"last_tile_dims=\{([^}]*)\}", rest)
    if m2:
        names = {"replicated": 0, "manual": 4, "unknown": 5, "unreduced": 6}
        sp.last_tile_dims.extend(names.get(x.strip(), 0) for x in m2.group(1).split(",") if x.strip())
    return sp
