"""BIR opcodes for the nki.isa instructions that have no older BIR counterpart.

Kept apart from the core table (``opcodes._TABLE`` appends these) so the NKI work does not touch
the rows other layers own. Semantics: ``neuronxcc.starfish.birsim.nki_ops`` (the executable
definition); each doc line states it.
"""


# numeric codes 100..: clear of the core table's (1..40) and custom_op (133)
def table(OpcodeInfo, R):
    ON = ("SBUF", "PSUM")
    return [
        OpcodeInfo("max8", 100, ("DVE",), (R("out", *ON),), (R("in", *ON),), {},
                   doc="out[p, 0:8] = the 8 largest values of in[p, :] (fp32 compare), descending"),
        OpcodeInfo("find_index8", 101, ("DVE",), (R("out", *ON),), (R("in", *ON), R("vals", *ON)), {},
                   doc="out[p, k] = index of the first element of in[p, :] equal to vals[p, k] (2^32-1 if none)"),
        OpcodeInfo("match_replace8", 102, ("DVE",), (R("out", *ON), R("index", *ON, present_if="with_index")),
                   (R("in", *ON), R("vals", *ON)), {"imm": 0.0, "with_index": False},
                   doc="out = in with the first occurrence (in order) of each vals[p, k] replaced by imm; "
                       "index[p, k] = where it was found"),
        OpcodeInfo("bn_stats", 103, ("DVE",), (R("out", *ON),), (R("in", *ON),), {},
                   doc="out[p, 0:6] = (count, mean, var*count) of the even-indexed then the odd-indexed "
                       "free elements of in[p, :]"),
        OpcodeInfo("bn_aggr", 104, ("DVE",), (R("out", *ON),), (R("in", *ON),), {},
                   doc="in[p, :] holds (count, mean, var*count) triples; out[p, 0:2] = (mean, variance) of "
                       "the union (Chan's parallel formula, fp32)"),
        OpcodeInfo("shuffle", 105, ("DVE",), (R("out", *ON),), (R("in", *ON),), {"mask": list(range(32))},
                   doc="within each 32-partition quadrant: out[q*32+i] = in[q*32+mask[i]]; mask[i]=255 leaves "
                       "out partition i unchanged"),
        OpcodeInfo("local_gather", 106, ("POOL",), (R("out", "SBUF"),), (R("in", "SBUF"), R("index", "SBUF")),
                   {"num_elem_per_idx": 1, "num_valid_indices": None},
                   doc="per 16-partition group g: idx = index[g] flattened partition-major (first "
                       "num_valid_indices); row j of the gathered data = in[g*16 + idx[j]//F', "
                       "(idx[j] % F')*e ...] ... see birsim.nki_ops.local_gather"),
        OpcodeInfo("dropout", 107, ("DVE",), (R("out", *ON),), (R("in", *ON), R("prob", *ON, present_if="prob_ap")),
                   {"prob": 0.0, "prob_ap": False, "seed": 0},
                   doc="out = 0 where u < prob else in; u uniform [0,1) from a counter-based generator keyed "
                       "by (seed, execution count, element index)"),
        OpcodeInfo("range_select", 108, ("DVE",), (R("out", *ON), R("accum", *ON, present_if="reduce")),
                   (R("in", *ON), R("bound0", *ON), R("bound1", *ON)),
                   {"cmp0": "ge", "cmp1": "lt", "start": 0, "on_false": -3.4028234663852886e38, "reduce": False},
                   doc="j = free index + start (fp32); out = in where (j cmp0 bound0[p]) and (j cmp1 bound1[p]) "
                       "else on_false; reduce: accum[p] = max over free of out"),
        OpcodeInfo("sequence_bounds", 109, ("POOL",), (R("out", "SBUF"),), (R("in", "SBUF"),), {},
                   doc="in[0, :] segment ids; out[0, 0, i] / out[0, 1, i] = first / last+1 index of the segment "
                       "of element i; id 0 (padding) gives (n, -1)"),
        OpcodeInfo("rand", 110, ("DVE",), (R("out", *ON),), (), {"seed": 0},
                   doc="out = uniform [0, 1) from the counter-based generator keyed by (seed, execution count, "
                       "element index)"),
        OpcodeInfo("gather_flat", 111, ("POOL",), (R("out", "SBUF"),), (R("in", "SBUF"), R("index", "SBUF")), {},
                   doc="out[p, j] = in[p, index[p, j]] over each partition's flattened free elements"),
        OpcodeInfo("device_print", 112, ("DVE",), (), (R("in", *ON),), {"prefix": ""},
                   doc="birsim prints prefix and the operand's values (a debugging aid; no effect on state)"),
    ]
