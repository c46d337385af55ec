"""What a NEFF says about a multi-rank program (our own members; the public
format names only the ``def.json`` keys ``replica_groups`` and
``src_target_pairs`` that the runtime reads, not their layout).

Written by ``write_neff`` when the module has collectives or a rank count:

  ``sg00/def.json``: ``replica_groups`` = every distinct group (lists of global
  rank ids) the collectives use, in first-use order; ``src_target_pairs`` =
  every [source, target] pair of the collective-permutes.

  ``sg00/collectives.json`` = ``{"version": 1, "num_ranks": N,
  "rank_space": [num_replicas, num_partitions], "rank_id_var": name or null,
  "collectives": [{"id", "name", "op", "reduce", "dtype", "in_bytes",
  "out_bytes", "groups", "pairs", "queue"}, ...]}``: one entry per collective
  instruction in program order; ``rank_id_var`` is the const int32/uint32[2]
  variable the runtime fills with [replica id, partition id] per rank.

``read_neff(path).collectives`` returns that document (None for a one-core NEFF).
"""
import json

__all__ = ["COLLECTIVES_JSON", "collectives_doc", "add_members"]

COLLECTIVES_JSON = "sg00/collectives.json"


def collectives_doc(module):
    """The collectives.json document of MODULE, or None when it is a one-rank program."""
    attrs = getattr(module, "attrs", None) or {}
    rs = attrs.get("rank_space")
    entries = []
    for n in module.walk():
        if getattr(n, "kind", None) != "inst" or n.opcode != "collective":
            continue
        a = n.attrs
        src, dst = n.srcs[0], n.dsts[0]
        entries.append({"id": int(a.get("collective_id", len(entries))), "name": n.name, "op": a.get("op", "all_reduce"),
                        "reduce": a.get("reduce"), "dtype": src.dtype,
                        "in_bytes": int(src.num_elements * src.itemsize),
                        "out_bytes": int(dst.num_elements * dst.itemsize),
                        "groups": a.get("groups") or [], "pairs": a.get("pairs") or [],
                        "queue": a.get("queue", "qCollective")})
    if not rs and not entries:
        return None
    rs = [int(x) for x in (rs or [1, 1])]
    return {"version": 1, "num_ranks": rs[0] * rs[1], "rank_space": rs,
            "rank_id_var": attrs.get("rank_id_tensor"), "collectives": entries}


def add_members(module, def_json, members):
    """Fill def.json's replica_groups / src_target_pairs and the collectives.json member."""
    doc = collectives_doc(module)
    if doc is None:
        return
    groups, pairs = [], []
    for e in doc["collectives"]:
        for g in e["groups"]:
            if g not in groups:
                groups.append(g)
        for p in e["pairs"]:
            if p not in pairs:
                pairs.append(p)
    def_json["replica_groups"] = groups
    def_json["src_target_pairs"] = pairs
    members[COLLECTIVES_JSON] = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
