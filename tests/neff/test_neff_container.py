"""NEFF container: payload variants, determinism, and every refusal of the reader."""
import gzip
import hashlib
import io
import struct
import tarfile

import pytest

from neuronxcc.errors import NeffFormatError
from neuronxcc.neff.container import make_tar, pack_neff, unpack_neff
from neuronxcc.neff.header import NeffHeader

MEMBERS = {"b.json": b'{"b": 1}\n', "sg00/a.bin": bytes(range(256)) * 5, "a.txt": b"hello"}
UUID = bytes(range(16))


def test_gzip_md5_variant():
    data = pack_neff(MEMBERS, "m", uuid_bytes=UUID)
    payload = data[1024:]
    assert struct.unpack_from("<Q", data, 0)[0] == 2
    assert payload[:2] == b"\x1f\x8b"
    assert data[172:188] == hashlib.md5(payload).digest()
    assert data[188:204] == b"0" * 16
    assert struct.unpack_from("<Q", data, 16)[0] == len(payload)
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(payload))) as t:
        assert t.getnames() == sorted(MEMBERS)
    hdr, members = unpack_neff(data)
    assert members == MEMBERS and hdr.pkg_version == 2 and hdr.uuid == UUID


def test_raw_sha256_variant():
    data = pack_neff(MEMBERS, "m", fast_loading=True, uuid_bytes=UUID)
    payload = data[1024:]
    assert struct.unpack_from("<Q", data, 0)[0] == 1
    assert data[172:204] == hashlib.sha256(payload).digest()
    with tarfile.open(fileobj=io.BytesIO(payload), mode="r:") as t:   # a plain tar
        assert t.getnames() == sorted(MEMBERS)
        for ti in t:
            assert ti.mtime == 0 and ti.uid == 0 and ti.gid == 0 and ti.uname == "" and ti.mode == 0o644
    hdr, members = unpack_neff(data)
    assert members == MEMBERS and hdr.pkg_version == 1


def test_same_members_same_bytes_random_uuid_differs():
    a = pack_neff(MEMBERS, "m", uuid_bytes=UUID)
    b = pack_neff(dict(reversed(list(MEMBERS.items()))), "m", uuid_bytes=UUID)
    assert a == b
    r1, r2 = pack_neff(MEMBERS, "m"), pack_neff(MEMBERS, "m")
    assert r1[:204] == r2[:204] and r1[220:] == r2[220:]
    assert r1[204:220] != r2[204:220]
    assert (r1[204 + 6] >> 4) == 4 and (r1[204 + 8] & 0xC0) == 0x80      # RFC 4122 v4


def _neff(tar_bytes, pkg=2, **hdr):
    payload = gzip.compress(tar_bytes, mtime=0) if pkg == 2 else tar_bytes
    h = (hashlib.md5(payload).digest() + b"0" * 16) if pkg == 2 else hashlib.sha256(payload).digest()
    fields = dict(pkg_version=pkg, data_size=len(payload), hash=h, name="x")
    fields.update(hdr)
    return NeffHeader(**fields).pack() + payload


def _tar(entries):
    """entries: list of (name, type, extra) crafted by hand."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as t:
        for name, typ, extra in entries:
            ti = tarfile.TarInfo(name)
            ti.type = typ
            data = b""
            if typ == tarfile.REGTYPE:
                data = extra or b"x"
                ti.size = len(data)
            elif typ in (tarfile.SYMTYPE, tarfile.LNKTYPE):
                ti.linkname = extra
            elif typ in (tarfile.CHRTYPE, tarfile.BLKTYPE):
                ti.devmajor, ti.devminor = 1, 3
            t.addfile(ti, io.BytesIO(data) if data else None)
    return buf.getvalue()


OK = ("sg00/def.json", tarfile.REGTYPE, b"{}")


@pytest.mark.parametrize("entry,word", [
    (("/etc/passwd", tarfile.REGTYPE, None), "absolute"),
    (("../evil", tarfile.REGTYPE, None), "'..'"),
    (("sg00/../../evil", tarfile.REGTYPE, None), "'..'"),
    (("link", tarfile.SYMTYPE, "/etc/passwd"), "link"),
    (("hard", tarfile.LNKTYPE, "sg00/def.json"), "link"),
    (("dev", tarfile.CHRTYPE, None), "device"),
    (("blk", tarfile.BLKTYPE, None), "device"),
    (("fifo", tarfile.FIFOTYPE, None), "fifo"),
    (("sg00/def.json", tarfile.REGTYPE, b"again"), "more than once"),
    (("./sg00/def.json", tarfile.REGTYPE, b"again"), "more than once"),
])
@pytest.mark.parametrize("pkg", [1, 2])
def test_unsafe_members_are_refused(entry, word, pkg):
    data = _neff(_tar([OK, entry]), pkg=pkg)
    with pytest.raises(NeffFormatError) as ei:
        unpack_neff(data)
    assert word in str(ei.value)
    assert ei.value.one_line().startswith("[NCC_ENEF001]")


def test_safe_tar_with_dirs_and_dot_slash_reads():
    data = _neff(_tar([("sg00", tarfile.DIRTYPE, None), ("./sg00/def.json", tarfile.REGTYPE, b"{}")]))
    _, members = unpack_neff(data)
    assert members == {"sg00/def.json": b"{}"}


def test_sizes_that_disagree_with_the_file_are_refused():
    good = pack_neff(MEMBERS, "m", uuid_bytes=UUID)
    unpack_neff(good)
    with pytest.raises(NeffFormatError, match="data_size"):
        unpack_neff(good[:-1])                         # truncated
    with pytest.raises(NeffFormatError, match="data_size"):
        unpack_neff(good + b"\0")                      # trailing bytes
    bad = bytearray(good)
    struct.pack_into("<Q", bad, 16, len(good))         # data_size larger than the file
    with pytest.raises(NeffFormatError, match="data_size"):
        unpack_neff(bytes(bad))
    bad = bytearray(good)
    struct.pack_into("<Q", bad, 8, 512)
    with pytest.raises(NeffFormatError, match="header_size"):
        unpack_neff(bytes(bad))
    with pytest.raises(NeffFormatError, match="shorter than"):
        unpack_neff(good[:1000])


def test_unknown_versions_hash_and_payload_are_refused():
    good = pack_neff(MEMBERS, "m", uuid_bytes=UUID)
    for off, val, word in [(0, 3, "Unsupported NEFF packager"), (0, 0, "Unsupported NEFF packager"),
                           (24, 3, "version 3.0 not supported"), (544, 1 << 27, "newer version")]:
        bad = bytearray(good)
        struct.pack_into("<Q", bad, off, val)
        with pytest.raises(NeffFormatError, match=word):
            unpack_neff(bytes(bad))
    bad = bytearray(good)
    bad[-5] ^= 0xFF
    with pytest.raises(NeffFormatError, match="hash"):
        unpack_neff(bytes(bad))
    bad = bytearray(good)
    bad[172] ^= 1
    with pytest.raises(NeffFormatError, match="md5"):
        unpack_neff(bytes(bad))
    junk = b"this payload is not gzip data"
    hdr = NeffHeader(pkg_version=2, data_size=len(junk), hash=hashlib.md5(junk).digest() + b"0" * 16)
    with pytest.raises(NeffFormatError, match="not gzip"):
        unpack_neff(hdr.pack() + junk)
    with pytest.raises(NeffFormatError, match="tar"):
        unpack_neff(_neff(b"this is not a tar archive" * 30, pkg=1))


def test_make_tar_is_sorted_and_fixed():
    t = make_tar({"z": b"1", "a/b": b"22"})
    with tarfile.open(fileobj=io.BytesIO(t)) as tf:
        assert [(m.name, m.size, m.mtime, m.mode) for m in tf] == [("a/b", 2, 0, 0o644), ("z", 1, 0, 0o644)]
