"""An allocation checker independent of the walrus allocators' bookkeeping.

It recomputes, from nothing but the (start, end, partitions, bytes) of every
value and the placement, that no two simultaneously live values overlap in
(partition range x byte range), that placements respect the target's limits
(partition-start rules, capacity, alignment) and, for PSUM, the bank rule.
It is written pair-wise on purpose: slow and obvious.
"""


def legal_starts(nparts):
    if nparts > 64:
        return {0}
    if nparts > 32:
        return {0, 64}
    return {0, 32, 64, 96}


def check_placement(values, capacity, num_partitions=128, align=1, bank_bytes=0):
    """values: list of dicts with start, end (inclusive), nparts, size, pstart, offset.

    Returns a list of human-readable violations (empty when the placement is legal).
    """
    bad = []
    for i, v in enumerate(values):
        if v["pstart"] not in legal_starts(v["nparts"]):
            bad.append("value %d: start partition %d illegal for %d partitions" % (i, v["pstart"], v["nparts"]))
        if v["pstart"] + v["nparts"] > num_partitions:
            bad.append("value %d: partitions beyond %d" % (i, num_partitions))
        if v["offset"] < 0 or v["offset"] + v["size"] > capacity:
            bad.append("value %d: bytes [%d,%d) outside [0,%d)" % (i, v["offset"], v["offset"] + v["size"], capacity))
        if align > 1 and v["offset"] % align:
            bad.append("value %d: offset %d not %d-aligned" % (i, v["offset"], align))
        if bank_bytes:
            first, last = v["offset"] // bank_bytes, (v["offset"] + v["size"] - 1) // bank_bytes
            if v["size"] <= bank_bytes and first != last:
                bad.append("value %d: crosses a PSUM bank boundary" % i)
            if v["size"] > bank_bytes and v["offset"] % bank_bytes:
                bad.append("value %d: multi-bank value not bank-aligned" % i)
    for i in range(len(values)):
        a = values[i]
        for j in range(i + 1, len(values)):
            b = values[j]
            live = a["start"] <= b["end"] and b["start"] <= a["end"]
            parts = a["pstart"] < b["pstart"] + b["nparts"] and b["pstart"] < a["pstart"] + a["nparts"]
            byts = a["offset"] < b["offset"] + b["size"] and b["offset"] < a["offset"] + a["size"]
            if live and parts and byts:
                bad.append("values %d and %d overlap while both live" % (i, j))
    return bad
