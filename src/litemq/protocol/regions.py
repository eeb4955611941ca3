"""Byte regions of files, so a response can carry log data without copying it (sendfile)."""

from __future__ import annotations

from typing import BinaryIO, NamedTuple


class FileRegion(NamedTuple):
    """``length`` bytes of ``file`` starting at byte ``position``.

    The broker writes it to a plaintext socket with ``sendfile``; the file object is kept alive
    by this reference, so a segment deleted meanwhile (retention) still reads correctly.
    """

    file: BinaryIO
    position: int
    length: int

    def read(self) -> bytes:
        """Return the region's bytes (``os.pread``; the fallback when sendfile is not used)."""
        import os

        return os.pread(self.file.fileno(), self.length, self.position)


class RecordsParts:
    """The value of a ``records`` field made of several pieces: ``bytes`` and :class:`FileRegion`.

    ``size`` is the total length in bytes; the codec writes the length prefix from it and then
    the parts in order.
    """

    __slots__ = ("parts", "size")

    def __init__(self, parts: list[bytes | FileRegion] | None = None) -> None:
        self.parts: list[bytes | FileRegion] = []
        self.size = 0
        for p in parts or ():
            self.append(p)

    def append(self, part: bytes | FileRegion) -> None:
        self.parts.append(part)
        self.size += part.length if isinstance(part, FileRegion) else len(part)

    def __len__(self) -> int:
        return self.size

    def to_bytes(self) -> bytes:
        """All parts joined into one ``bytes`` (reads file regions)."""
        return b"".join(p.read() if isinstance(p, FileRegion) else bytes(p) for p in self.parts)
