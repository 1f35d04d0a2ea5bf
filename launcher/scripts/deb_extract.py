#!/usr/bin/env python3
"""deb_extract.py: unpacks Debian packages (.deb) into a prefix folder without dpkg, ar or root, for
gpu-run.sh on machines that have only a Python.

    deb_extract.py PREFIX FILE.deb...

Invariants:
  - A .deb is an ar archive holding debian-binary, control.tar.* and data.tar.*; only data.tar.* (xz,
    gz, bz2 or uncompressed: what Python's tarfile reads; Debian 12's packages use xz) is unpacked,
    into PREFIX, as dpkg -x would (PREFIX/usr/..., PREFIX/etc/...). No maintainer script runs.
  - Symlinks are kept; an absolute one (/usr/lib/...) is rewritten to point inside PREFIX, relative to
    its own folder, so that the prefix can move and never reaches into the system's folders.
  - Nothing is written outside PREFIX: a member whose path leaves it is refused (exit status 2).
  - Exit status 2 with one line on stderr for a file that is not a .deb, names no data.tar, or a data
    archive Python cannot read (e.g. zstd, as Ubuntu's packages are).
"""
import io
import os
import sys
import tarfile


def fail(message):
    sys.stderr.write("deb_extract: error: " + message + "\n")
    sys.exit(2)


def ar_members(path):
    """Yields (name, bytes) of each member of the ar archive at path."""
    with open(path, "rb") as f:
        if f.read(8) != b"!<arch>\n":
            fail(path + ": not a .deb (no ar header); pass Debian package files")
        while True:
            header = f.read(60)
            if len(header) < 60:
                return
            name = header[0:16].decode("ascii", "replace").strip().rstrip("/")
            size = int(header[48:58].decode("ascii").strip())
            data = f.read(size)
            if size % 2:
                f.read(1)  # members are 2-byte aligned
            yield name, data


def inside(prefix, path):
    real_prefix = os.path.realpath(prefix)
    return os.path.commonpath([real_prefix, os.path.realpath(path)]) == real_prefix


def unpack(prefix, deb):
    data = None
    for name, payload in ar_members(deb):
        if name.startswith("data.tar"):
            data = (name, payload)
    if data is None:
        fail(deb + ": no data.tar member; is it a Debian package?")
    name, payload = data
    try:
        archive = tarfile.open(fileobj=io.BytesIO(payload), mode="r:*")
    except tarfile.TarError:
        fail(deb + ": cannot read " + name + " (a compression this Python's tarfile does not read); repack it with xz or gzip")
    links = []
    with archive:
        for member in archive.getmembers():
            target = os.path.join(prefix, member.name)
            if not inside(prefix, os.path.dirname(target) or prefix):
                fail(deb + ": member " + member.name + " leaves the prefix")
            if member.issym():
                links.append((target, member.linkname))
                continue
            if member.islnk():
                links.append((target, "/" + member.linkname.lstrip("./")))
                continue
            if member.isdir():
                os.makedirs(target, exist_ok=True)
                continue
            if not member.isfile():
                continue  # devices, fifos: none in library packages
            os.makedirs(os.path.dirname(target), exist_ok=True)
            source = archive.extractfile(member)
            if os.path.lexists(target):
                os.remove(target)
            with open(target, "wb") as out:
                out.write(source.read())
            os.chmod(target, member.mode & 0o7777)
    for path, link in links:
        if link.startswith("/"):  # inside the prefix, relative to the link's own folder
            link = os.path.relpath(os.path.join(prefix, link.lstrip("/")), os.path.dirname(path))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if os.path.lexists(path):
            os.remove(path)
        os.symlink(link, path)


def main(argv):
    if len(argv) < 3:
        sys.stderr.write("usage: deb_extract.py PREFIX FILE.deb...\n")
        return 64
    prefix = os.path.abspath(argv[1])
    os.makedirs(prefix, exist_ok=True)
    for deb in argv[2:]:
        unpack(prefix, deb)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
