"""The public 1024-byte NEFF header: layout, pack and unpack.

A NEFF is this little-endian C struct followed by the payload (a tar, gzip'd
for ``pkg_version`` 2). There is no magic number. Every field sits at the
offset of the public layout; ``FIELDS`` lists them with offset and size and
``pack``/``unpack`` are exact inverses for headers whose strings are
NUL-terminated inside their field.

    offset  type        field
    0       u64         pkg_version          2: gzip'd tar + md5, 1: raw tar + sha256
    8       u64         header_size          1024
    16      u64         data_size            payload bytes
    24      u64         neff_version_major
    32      u64         neff_version_minor
    40      u8[128]     neff_build_version   NUL-terminated text
    168     u32         num_tpb
    172     u8[32]      hash                 md5 (16) + b'0'*16, or sha256 (32)
    204     u8[16]      uuid                 RFC 4122
    220     char[256]   name                 NUL-terminated text
    476     u32         requested_tpb_count
    480     u8[64]      tpb_per_node
    544     u64         feature_bits
    552     u32         lnc_size
    556     u8[468]     pad                  zeros
"""
import struct
from dataclasses import dataclass, field, fields

HEADER_SIZE = 1024

PKG_VERSION_RAW_SHA256 = 1
PKG_VERSION_GZIP_MD5 = 2
SUPPORTED_PKG_VERSIONS = (PKG_VERSION_RAW_SHA256, PKG_VERSION_GZIP_MD5)

NEFF_VERSION_MAJOR = 2
NEFF_VERSION_MINOR = 0
MAX_NEFF_VERSION_MAJOR = 2

# feature_bits: bit 3 (0x8) = the NEFF uses custom ops (GpSimd CPU libraries).
NEFF_FEATURE_CUSTOM_OPS = 0x8
# With major 2, a set bit in 27..62 marks a NEFF from a newer compiler.
NEWER_FEATURE_MASK = sum(1 << b for b in range(27, 63))

# (name, struct code, offset, size); the offsets are checked at import.
FIELDS = (
    ("pkg_version", "Q", 0, 8),
    ("header_size", "Q", 8, 8),
    ("data_size", "Q", 16, 8),
    ("neff_version_major", "Q", 24, 8),
    ("neff_version_minor", "Q", 32, 8),
    ("neff_build_version", "128s", 40, 128),
    ("num_tpb", "I", 168, 4),
    ("hash", "32s", 172, 32),
    ("uuid", "16s", 204, 16),
    ("name", "256s", 220, 256),
    ("requested_tpb_count", "I", 476, 4),
    ("tpb_per_node", "64s", 480, 64),
    ("feature_bits", "Q", 544, 8),
    ("lnc_size", "I", 552, 4),
    ("pad", "468s", 556, 468),
)
_STRUCT = struct.Struct("<" + "".join(code for _, code, _, _ in FIELDS))
assert _STRUCT.size == HEADER_SIZE
for _name, _code, _off, _size in FIELDS:
    assert struct.calcsize("<" + "".join(c for n, c, o, s in FIELDS if o < _off)) == _off, _name
    assert struct.calcsize("<" + _code) == _size, _name

_TEXT_FIELDS = {"neff_build_version": 128, "name": 256}


def _text_to_field(text, size, what):
    raw = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    if b"\0" in raw:
        raise ValueError("NEFF header %s must not contain NUL" % what)
    if len(raw) > size - 1:
        raise ValueError("NEFF header %s is %d bytes; at most %d fit" % (what, len(raw), size - 1))
    return raw


def _field_to_text(raw):
    return raw.split(b"\0", 1)[0].decode("utf-8", errors="replace")


def truncate_utf8(text, max_bytes):
    """``text`` cut to at most ``max_bytes`` UTF-8 bytes on a character boundary."""
    raw = text.encode("utf-8")[:max_bytes]
    return raw.decode("utf-8", errors="ignore")


@dataclass
class NeffHeader:
    """The decoded header. Text fields are str; hash/uuid/tpb_per_node are bytes."""

    pkg_version: int = PKG_VERSION_GZIP_MD5
    header_size: int = HEADER_SIZE
    data_size: int = 0
    neff_version_major: int = NEFF_VERSION_MAJOR
    neff_version_minor: int = NEFF_VERSION_MINOR
    neff_build_version: str = ""
    num_tpb: int = 1
    hash: bytes = b"\0" * 32
    uuid: bytes = b"\0" * 16
    name: str = ""
    requested_tpb_count: int = 1
    tpb_per_node: bytes = b"\x01" + b"\0" * 63
    feature_bits: int = 0
    lnc_size: int = 1
    pad: bytes = field(default=b"\0" * 468, repr=False)

    def pack(self):
        """The 1024 header bytes."""
        values = []
        for name, code, _off, size in FIELDS:
            v = getattr(self, name)
            if name in _TEXT_FIELDS:
                v = _text_to_field(v, size, name)
            elif code.endswith("s"):
                v = bytes(v)
                if len(v) > size:
                    raise ValueError("NEFF header %s is %d bytes; the field holds %d" % (name, len(v), size))
            values.append(v)
        return _STRUCT.pack(*values)

    @classmethod
    def unpack(cls, data):
        """Decode the first 1024 bytes of ``data`` (no validation beyond length)."""
        if len(data) < HEADER_SIZE:
            raise ValueError("a NEFF header is %d bytes; got %d" % (HEADER_SIZE, len(data)))
        values = _STRUCT.unpack(bytes(data[:HEADER_SIZE]))
        kw = {}
        for (name, _code, _off, _size), v in zip(FIELDS, values):
            kw[name] = _field_to_text(v) if name in _TEXT_FIELDS else v
        return cls(**kw)

    @property
    def uuid_str(self):
        import uuid as _uuid

        return str(_uuid.UUID(bytes=bytes(self.uuid)))

    @property
    def hash_hex(self):
        """The digest as hex: md5 (hash[0:16]) for pkg_version 2, sha256 otherwise."""
        if self.pkg_version == PKG_VERSION_GZIP_MD5:
            return bytes(self.hash[:16]).hex()
        return bytes(self.hash).hex()

    def as_dict(self):
        """Field name -> value, in header order, without the padding."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "pad"}
