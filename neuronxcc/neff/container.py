"""The NEFF container below the members: deterministic tar, payload, header, hash.

``pack_neff(members, ...)`` turns ``{member name: bytes}`` into NEFF bytes;
``unpack_neff(data)`` is its checked inverse and the only place a NEFF's bytes
are trusted into members. Invariants:

* The tar lists members sorted by name, regular files only (no directory
  entries), mtime 0, uid/gid 0, empty owner names, mode 0644 (0755 for
  ``.so``), GNU format; the gzip stream has mtime 0 and no file name. So the
  same members and flags give the same bytes; only the header's uuid differs
  between two writes unless the caller passes one.
* pkg_version 2: gzip'd tar, md5 of the compressed payload in hash[0:16] and
  ASCII '0' in hash[16:32]. pkg_version 1 (fast loading): the raw tar and its
  sha256 in all 32 hash bytes.
* Reading refuses, with ``NeffFormatError``: a file shorter than the header,
  header_size other than 1024, data_size other than the bytes after the
  header, an unknown pkg_version, neff_version_major > 2, feature bits of a
  newer compiler, a hash mismatch, a payload that is not a tar, and unsafe or
  ambiguous members (absolute paths, '..', links, devices/fifos, duplicate
  names after stripping a leading './').
"""
import gzip
import hashlib
import io
import posixpath
import os
import tarfile
import zlib

from neuronxcc.errors import NeffFormatError
from neuronxcc.neff.header import (HEADER_SIZE, MAX_NEFF_VERSION_MAJOR, NEWER_FEATURE_MASK,
                                   PKG_VERSION_GZIP_MD5, PKG_VERSION_RAW_SHA256, SUPPORTED_PKG_VERSIONS,
                                   NeffHeader)

GZIP_LEVEL = 6


def make_tar(members):
    """Deterministic GNU tar of ``{name: bytes}``."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name in sorted(members):
            data = members[name]
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            ti.mtime = 0
            ti.uid = ti.gid = 0
            ti.uname = ti.gname = ""
            ti.mode = 0o755 if name.endswith(".so") else 0o644
            ti.type = tarfile.REGTYPE
            tar.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def payload_hash(pkg_version, payload):
    """The 32 hash bytes for a payload."""
    if pkg_version == PKG_VERSION_GZIP_MD5:
        return hashlib.md5(payload).digest() + b"0" * 16
    return hashlib.sha256(payload).digest()


def content_uuid(payload, name):
    """A v4-shaped uuid derived from the content (for reproducible tests)."""
    digest = bytearray(hashlib.sha256(payload + b"\0" + name.encode("utf-8")).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x40
    digest[8] = (digest[8] & 0x3F) | 0x80
    return bytes(digest)


def random_uuid4():
    """A fresh random RFC 4122 version-4 uuid (16 bytes): what ``uuid.uuid4().bytes`` gives,
    without importing ``uuid`` (its imports cost every compile's start-up)."""
    b = bytearray(os.urandom(16))
    b[6] = (b[6] & 0x0F) | 0x40
    b[8] = (b[8] & 0x3F) | 0x80
    return bytes(b)


def pack_neff(members, name, fast_loading=False, feature_bits=0, neff_build_version="", uuid_bytes=None, lnc_size=1):
    """NEFF bytes (header + payload) for ``{member name: bytes}``.

    ``uuid_bytes`` None means a fresh random v4 uuid.
    """
    tar = make_tar(members)
    if fast_loading:
        pkg, payload = PKG_VERSION_RAW_SHA256, tar
    else:
        pkg, payload = PKG_VERSION_GZIP_MD5, gzip.compress(tar, compresslevel=GZIP_LEVEL, mtime=0)
    if uuid_bytes is None:
        uuid_bytes = random_uuid4()
    hdr = NeffHeader(pkg_version=pkg, data_size=len(payload), neff_build_version=neff_build_version,
                     hash=payload_hash(pkg, payload), uuid=bytes(uuid_bytes), name=name,
                     feature_bits=feature_bits, lnc_size=int(lnc_size))
    return hdr.pack() + payload


# -- reading ------------------------------------------------------------------

def check_header(hdr, file_size):
    """Refuse a header that disagrees with the file or this reader."""
    if hdr.header_size != HEADER_SIZE:
        raise NeffFormatError("NEFF header_size is %d; this format has a %d-byte header"
                              % (hdr.header_size, HEADER_SIZE))
    if hdr.data_size != file_size - HEADER_SIZE:
        raise NeffFormatError("NEFF header data_size is %d but the file has %d bytes after the header"
                              % (hdr.data_size, file_size - HEADER_SIZE))
    if hdr.pkg_version not in SUPPORTED_PKG_VERSIONS:
        raise NeffFormatError("Unsupported NEFF packager version %d (known: 1, 2)" % hdr.pkg_version)
    if hdr.neff_version_major > MAX_NEFF_VERSION_MAJOR:
        raise NeffFormatError("NEFF version %d.%d not supported (at most %d)"
                              % (hdr.neff_version_major, hdr.neff_version_minor, MAX_NEFF_VERSION_MAJOR))
    if hdr.neff_version_major == 2 and hdr.feature_bits & NEWER_FEATURE_MASK:
        raise NeffFormatError("NEFF feature bits 0x%x were compiled by a newer version of the compiler"
                              % hdr.feature_bits)


def safe_member_name(ti, seen):
    """The normalised member name, or NeffFormatError for an unsafe/duplicate member.

    Returns None for directory entries (skipped).
    """
    raw = ti.name
    if ti.issym() or ti.islnk():
        raise NeffFormatError("NEFF member %r is a link; links are not allowed" % raw)
    if ti.ischr() or ti.isblk() or ti.isfifo() or ti.isdev():
        raise NeffFormatError("NEFF member %r is a device or fifo; not allowed" % raw)
    if ti.isdir():
        return None
    if not ti.isfile():
        raise NeffFormatError("NEFF member %r is not a regular file (type %r)" % (raw, ti.type))
    if raw.startswith("/") or raw.startswith("\\") or (len(raw) > 1 and raw[1] == ":"):
        raise NeffFormatError("NEFF member %r has an absolute path" % raw)
    if "\\" in raw or "\0" in raw:
        raise NeffFormatError("NEFF member %r has a backslash or NUL in its name" % raw)
    parts = raw.split("/")
    if ".." in parts:
        raise NeffFormatError("NEFF member %r leaves the archive ('..')" % raw)
    name = posixpath.normpath(raw)
    while name.startswith("./"):
        name = name[2:]
    if name in ("", "."):
        raise NeffFormatError("NEFF member %r has an empty name" % raw)
    if name in seen:
        raise NeffFormatError("NEFF member %r appears more than once" % name)
    seen.add(name)
    return name


def read_tar_members(tar_bytes):
    """``{name: bytes}`` in archive order from trusted-to-be-checked tar bytes."""
    members = {}
    seen = set()
    try:
        with tarfile.open(fileobj=io.BytesIO(tar_bytes), mode="r:") as tar:
            for ti in tar:
                name = safe_member_name(ti, seen)
                if name is None:
                    continue
                f = tar.extractfile(ti)
                members[name] = f.read() if f is not None else b""
    except tarfile.TarError as e:
        raise NeffFormatError("NEFF payload is not a readable tar: %s" % e)
    return members


def unpack_neff(data, verify_hash=True):
    """(NeffHeader, {member: bytes}) from NEFF bytes, checked as the module docstring says."""
    if len(data) < HEADER_SIZE:
        raise NeffFormatError("NEFF file is %d bytes; shorter than the %d-byte header" % (len(data), HEADER_SIZE))
    hdr = NeffHeader.unpack(data)
    check_header(hdr, len(data))
    payload = bytes(data[HEADER_SIZE:HEADER_SIZE + hdr.data_size])
    if verify_hash and payload_hash(hdr.pkg_version, payload) != bytes(hdr.hash):
        raise NeffFormatError("NEFF payload hash does not match the header (%s)"
                              % ("md5" if hdr.pkg_version == PKG_VERSION_GZIP_MD5 else "sha256"))
    if hdr.pkg_version == PKG_VERSION_GZIP_MD5:
        try:
            tar_bytes = gzip.decompress(payload)
        except (OSError, EOFError, zlib.error) as e:
            raise NeffFormatError("NEFF payload is not gzip data (pkg_version 2): %s" % e)
    else:
        tar_bytes = payload
    return hdr, read_tar_members(tar_bytes)
