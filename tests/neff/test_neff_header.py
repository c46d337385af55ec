"""The 1024-byte NEFF header: every field at its public offset, pack/unpack inverse."""
import struct
import uuid

import pytest

from neuronxcc.neff.header import FIELDS, HEADER_SIZE, NeffHeader

# The public layout (drop-in contract section 3.1), written out independently.
PUBLIC = [("pkg_version", 0, "<Q"), ("header_size", 8, "<Q"), ("data_size", 16, "<Q"),
          ("neff_version_major", 24, "<Q"), ("neff_version_minor", 32, "<Q"),
          ("neff_build_version", 40, "128s"), ("num_tpb", 168, "<I"), ("hash", 172, "32s"),
          ("uuid", 204, "16s"), ("name", 220, "256s"), ("requested_tpb_count", 476, "<I"),
          ("tpb_per_node", 480, "64s"), ("feature_bits", 544, "<Q"), ("lnc_size", 552, "<I"),
          ("pad", 556, "468s")]


def test_field_table_matches_public_layout():
    assert [(n, o) for n, _c, o, _s in FIELDS] == [(n, o) for n, o, _f in PUBLIC]
    assert FIELDS[-1][2] + FIELDS[-1][3] == HEADER_SIZE == 1024


def test_every_field_lands_at_its_offset():
    u = uuid.uuid4().bytes
    h = NeffHeader(pkg_version=2, header_size=1024, data_size=0x1122334455, neff_version_major=2,
                   neff_version_minor=7, neff_build_version="2.24.0.0+open", num_tpb=3,
                   hash=bytes(range(32)), uuid=u, name="my_model", requested_tpb_count=5,
                   tpb_per_node=b"\x02\x03", feature_bits=0x8 | (1 << 40), lnc_size=2)
    raw = h.pack()
    assert len(raw) == 1024
    got = {n: struct.unpack_from(f, raw, o)[0] for n, o, f in PUBLIC}
    assert got["pkg_version"] == 2 and got["header_size"] == 1024 and got["data_size"] == 0x1122334455
    assert got["neff_version_major"] == 2 and got["neff_version_minor"] == 7
    assert got["neff_build_version"] == b"2.24.0.0+open".ljust(128, b"\0")
    assert got["num_tpb"] == 3
    assert got["hash"] == bytes(range(32))
    assert got["uuid"] == u
    assert got["name"] == b"my_model".ljust(256, b"\0")
    assert got["requested_tpb_count"] == 5
    assert got["tpb_per_node"] == b"\x02\x03".ljust(64, b"\0")
    assert got["feature_bits"] == 0x8 | (1 << 40)
    assert got["lnc_size"] == 2
    assert got["pad"] == b"\0" * 468
    # little-endian: the low byte of data_size is at offset 16
    assert raw[16] == 0x55 and raw[17] == 0x44


def test_pack_unpack_round_trip():
    h = NeffHeader(data_size=99, name="ünïcode name", neff_build_version="x", uuid=uuid.uuid4().bytes,
                   hash=b"\xab" * 16 + b"0" * 16, feature_bits=8)
    h2 = NeffHeader.unpack(h.pack() + b"payload")
    assert h2 == h
    assert h2.hash_hex == "ab" * 16
    assert uuid.UUID(h2.uuid_str).bytes == h.uuid


def test_text_fields_must_fit_with_a_nul():
    NeffHeader(name="a" * 255).pack()
    with pytest.raises(ValueError):
        NeffHeader(name="a" * 256).pack()
    with pytest.raises(ValueError):
        NeffHeader(neff_build_version="v" * 128).pack()
    with pytest.raises(ValueError):
        NeffHeader(name="a\0b").pack()
    with pytest.raises(ValueError):
        NeffHeader.unpack(b"\0" * 1023)
