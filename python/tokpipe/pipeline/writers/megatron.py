"""Megatron-LM's indexed dataset (``MMapIndexedDataset``, megatron-core ``IndexedDataset``):
a ``PREFIX.bin`` of token ids back to back and a ``PREFIX.idx`` index.

The ``.idx`` layout (all little-endian), as megatron-core's ``indexed_dataset.py`` reads it:

    b"MMIDIDX\\x00\\x00"          magic, 9 bytes
    u64 1                         version
    u8  dtype code                8 = uint16, 4 = int32 (also 1 uint8 ... 7 float32)
    u64 sequence count            S
    u64 document count            D + 1 (the length of the document index)
    int32[S] sequence lengths     tokens per sequence
    int64[S] sequence pointers    byte offset of each sequence in the .bin
    int64[D + 1] document index   sequence index where each document starts, then S

Here every document is one sequence, so the document index is ``0, 1, ..., D``. The dtype
follows megatron-core's ``DType.optimal_dtype(vocab_size)``: uint16 when the vocabulary
has fewer than 65,500 entries, else int32.

The sequences are listed in the order they are given (``add``: lengths and byte pointers),
and the pointers say where each one is in the ``.bin``: the order of the ``.idx`` need not
be the order of the ``.bin`` (megatron-core reads each sequence at its pointer). That is how
``tokpipe tokenize`` shuffles without rewriting the ids: the ``.bin`` holds the documents in
input order (``link_bin`` makes it from a file that already has those bytes, ``append_bin``
writes them), and the ``.idx`` lists them in shuffled order.

The index entries go to temporary files as they come (12 bytes a document, never held);
``close`` writes the ``.idx`` from them. Both files are written under temporary names and
renamed into place, ``.bin`` first, so a prefix with an ``.idx`` is complete.

Both files' sha256 digests (``bin_digest``, ``idx_digest``, for the manifest) are taken as the
bytes are written (the ``.bin``'s on a thread beside the writes), or, for a ``.bin`` linked to a
file, by one read of that file on a thread of its own while the caller writes the rest of the
output.
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import os
import shutil
import struct
from pathlib import Path

import numpy as np

from tokpipe.errors import InvalidArgumentError, PipelineError
from tokpipe.pipeline.writers._files import HashingWriter, hash_in_background

__all__ = ["MegatronWriter", "megatron_dtype", "MAGIC", "DTYPE_CODES"]

MAGIC = b"MMIDIDX\x00\x00"
VERSION = 1
#: megatron-core's ``DType`` codes.
DTYPE_CODES = {np.dtype(np.uint8): 1, np.dtype(np.int8): 2, np.dtype(np.int16): 3, np.dtype(np.int32): 4,
               np.dtype(np.int64): 5, np.dtype(np.float64): 6, np.dtype(np.float32): 7, np.dtype(np.uint16): 8}


def megatron_dtype(vocab_size: int) -> np.dtype:
    """Megatron's rule: uint16 for fewer than 65,500 token ids, else int32."""
    return np.dtype(np.uint16) if vocab_size < 65500 else np.dtype(np.int32)


class MegatronWriter:
    """Writes ``prefix.bin`` / ``prefix.idx``: index entries with ``add``, the ``.bin`` with
    ``link_bin`` or ``append_bin``."""

    def __init__(self, prefix: str | os.PathLike[str], dtype: np.dtype) -> None:
        self.prefix = Path(prefix)
        self.dtype = np.dtype(dtype)
        if self.dtype not in DTYPE_CODES:
            raise InvalidArgumentError(f"no Megatron dtype code for {self.dtype}")
        self.prefix.parent.mkdir(parents=True, exist_ok=True)
        self.bin_path = self.prefix.with_name(self.prefix.name + ".bin")
        self.idx_path = self.prefix.with_name(self.prefix.name + ".idx")
        self._bin_tmp = self.bin_path.with_name(f".{self.bin_path.name}.tmp")
        self._lengths_tmp = self.idx_path.with_name(f".{self.idx_path.name}.lengths.tmp")
        self._pointers_tmp = self.idx_path.with_name(f".{self.idx_path.name}.pointers.tmp")
        self._bin: HashingWriter | None = None
        self._bin_hash: cf.Future[tuple[int, str]] | None = None
        self._lengths = open(self._lengths_tmp, "wb")
        self._pointers = open(self._pointers_tmp, "wb")
        self.documents = 0
        self.tokens = 0
        #: (size, hex sha256) of the published ``.bin`` and ``.idx``, once ``close`` returned.
        self.bin_digest: tuple[int, str] | None = None
        self.idx_digest: tuple[int, str] | None = None

    def add(self, lengths: np.ndarray, pointers: np.ndarray) -> None:
        """Lists sequences: their lengths in tokens and byte positions in the ``.bin``."""
        if len(lengths) != len(pointers):
            raise InvalidArgumentError("one pointer per length")
        self._lengths.write(np.ascontiguousarray(lengths, dtype="<i4").tobytes())
        self._pointers.write(np.ascontiguousarray(pointers, dtype="<i8").tobytes())
        self.documents += len(lengths)
        self.tokens += int(np.sum(lengths, dtype=np.int64))

    def link_bin(self, source: Path) -> None:
        """The ``.bin`` is ``source`` as it is: a hard link to it (a copy where the file
        system has no hard links). ``source`` must not change afterwards. Its digest is
        taken by one read of the file, beside the caller's work until ``close``."""
        self._bin_tmp.unlink(missing_ok=True)
        try:
            os.link(source, self._bin_tmp)
        except OSError:
            shutil.copyfile(source, self._bin_tmp)
        self._bin_hash = hash_in_background(self._bin_tmp)

    def append_bin(self, ids: np.ndarray) -> None:
        """Appends token ids to the ``.bin`` (converted to its dtype). ``ids`` must not change
        until ``close``: they are hashed on a thread, beside the caller's next reads."""
        if self._bin is None:
            self._bin = HashingWriter(open(self._bin_tmp, "wb"), in_background=True)
        ids = np.asarray(ids)
        if len(ids) and self.dtype == np.uint16 and ids.dtype.itemsize > 2 and int(ids.max()) > 0xFFFF:
            raise InvalidArgumentError("a token id does not fit the .bin's uint16")
        little = self.dtype.newbyteorder("<")
        if ids.dtype.kind in "ui" and ids.dtype.itemsize == little.itemsize and ids.dtype.byteorder in "<=|" \
                and np.little_endian:
            # Same width (uint32 ids into int32: token ids are far below 2**31): the bytes as
            # they are, written straight from the array.
            ids = ids.view(little)
        self._bin.write(np.ascontiguousarray(ids, dtype=little))

    def close(self) -> int:
        """Publishes the pair; returns the number of documents. The ``.bin`` must hold as
        many tokens as the sequences listed."""
        if self._bin is not None:
            bin_digest = (self._bin.size, self._bin.hexdigest())
            self._bin.close()
            self._bin = None
        elif self._bin_hash is not None:
            # Waited for before the rename below: the thread reads the file by its temporary name.
            bin_digest = self._bin_hash.result()
        else:
            self._bin_tmp.touch()
            bin_digest = (0, hashlib.sha256().hexdigest())
        self._lengths.close()
        self._pointers.close()
        size = self._bin_tmp.stat().st_size
        if size != self.tokens * self.dtype.itemsize:
            raise PipelineError(f"{self.bin_path.name}: {size} bytes for {self.tokens} tokens of {self.dtype}")
        if bin_digest[0] != size:
            raise PipelineError(f"{self.bin_path.name}: changed while its sha256 was taken "
                             f"({bin_digest[0]} of {size} bytes)")
        idx_tmp = self.idx_path.with_name(f".{self.idx_path.name}.tmp")
        with open(idx_tmp, "wb") as raw:
            f = HashingWriter(raw)
            f.write(MAGIC)
            f.write(struct.pack("<Q", VERSION))
            f.write(struct.pack("<B", DTYPE_CODES[self.dtype]))
            f.write(struct.pack("<Q", self.documents))
            f.write(struct.pack("<Q", self.documents + 1))
            for part in (self._lengths_tmp, self._pointers_tmp):
                with open(part, "rb") as src:
                    shutil.copyfileobj(src, f, 1 << 20)
            for start in range(0, self.documents + 1, 1 << 20):
                f.write(np.arange(start, min(start + (1 << 20), self.documents + 1), dtype="<i8").tobytes())
        os.replace(self._bin_tmp, self.bin_path)
        os.replace(idx_tmp, self.idx_path)
        self._lengths_tmp.unlink()
        self._pointers_tmp.unlink()
        self.bin_digest, self.idx_digest = bin_digest, (f.size, f.hexdigest())
        return self.documents

    def abort(self) -> None:
        if self._bin_hash is not None:
            # Not to be left reading a file being deleted; its outcome no longer matters.
            cf.wait([self._bin_hash])
        for f in (self._bin, self._lengths, self._pointers):
            if f is not None:
                f.close()
        for path in (self._bin_tmp, self._lengths_tmp, self._pointers_tmp):
            path.unlink(missing_ok=True)
