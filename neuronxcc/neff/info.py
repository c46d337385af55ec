"""neff-info: the text ``neuronx-cc neff-info FILE`` prints.

``format_neff_info(path)`` reads the NEFF with the shared reader (so an
unsafe or inconsistent file fails the same way as for birsim) and returns
three sections: the header fields, the members with their sizes, and the I/O
variables with name, dtype and shape (plus constants and custom-op libraries
when present).
"""
from neuronxcc.neff.header import PKG_VERSION_GZIP_MD5
from neuronxcc.neff.reader import read_neff


def _shape(shape):
    return "[" + ", ".join(str(d) for d in shape) + "]"


def format_neff_info(path):
    neff = read_neff(path)
    h = neff.header
    lines = ["NEFF: %s" % path, "", "Header:"]
    rows = [
        ("pkg_version", "%d (%s)" % (h.pkg_version, "gzip tar, md5" if h.pkg_version == PKG_VERSION_GZIP_MD5
                                     else "raw tar, sha256")),
        ("header_size", h.header_size),
        ("data_size", h.data_size),
        ("neff_version", "%d.%d" % (h.neff_version_major, h.neff_version_minor)),
        ("neff_build_version", h.neff_build_version),
        ("num_tpb", h.num_tpb),
        ("hash", h.hash_hex),
        ("uuid", h.uuid_str),
        ("name", h.name),
        ("requested_tpb_count", h.requested_tpb_count),
        ("tpb_per_node", " ".join(str(b) for b in bytes(h.tpb_per_node).rstrip(b"\0")) or "0"),
        ("feature_bits", "0x%x%s" % (h.feature_bits, " (custom_ops)" if neff.uses_custom_ops else "")),
        ("lnc_size", h.lnc_size),
    ]
    width = max(len(k) for k, _ in rows)
    lines += ["  %-*s  %s" % (width, k, v) for k, v in rows]

    sizes = neff.member_sizes
    lines += ["", "Members (%d):" % len(sizes)]
    nw = max([len(n) for n, _ in sizes] + [4])
    lines += ["  %-*s  %10d" % (nw, n, s) for n, s in sizes]

    def var_rows(title, vs):
        out = ["", "%s (%d):" % (title, len(vs))]
        if vs:
            w = max(len(v.name) for v in vs)
            out += ["  %-*s  var_id %-3d %-10s %s" % (w, v.name, v.var_id, v.dtype, _shape(v.shape)) for v in vs]
        return out

    lines += var_rows("Inputs", neff.inputs)
    lines += var_rows("Outputs", neff.outputs)
    if neff.constants:
        lines += var_rows("Constants", neff.constants)
    if neff.ucode_lib:
        lines += ["", "Custom op libraries (%d):" % len(neff.ucode_lib)]
        for lib in neff.ucode_lib:
            fns = ", ".join("%s=%d" % (f["name"], f["sub_opcode"]) for f in lib.get("functions", []))
            lines.append("  %s  cpu %d/%d  ucode %s  isa %s  functions: %s"
                         % (lib["library"], lib["cpu_id"], lib["total_cpus"], lib["ulib_to_ucode_version"],
                            lib["ulib_to_isa_version"], fns or "-"))
    cc = getattr(neff, "collectives", None)
    if cc:
        rs = cc.get("rank_space", [cc.get("num_ranks", 1), 1])
        lines += ["", "Ranks: %d (%d replicas x %d partitions), %d collectives%s:" % (
            cc.get("num_ranks", 1), rs[0], rs[1], len(cc.get("collectives", [])),
            ", rank id in %s" % cc["rank_id_var"] if cc.get("rank_id_var") else "")]
        for e in cc.get("collectives", []):
            over = ("pairs %s" % e["pairs"]) if e["op"] == "permute" else ("groups of %d" % len((e["groups"] or [[]])[0]))
            lines.append("  #%d %-14s %-6s %-9s %8d -> %8d bytes  %s  (%s)" % (
                e["id"], e["op"], e.get("reduce") or "-", e["dtype"], e["in_bytes"], e["out_bytes"], over, e["name"]))
    return "\n".join(lines) + "\n"
