"""Tokenize and pack: text in, pretraining shards out (``tokpipe tokenize``).

Two phases.

1. **Tokenize** (parallel, resumable): the local executor runs the ``tokenize`` stage over
   the input tasks on the worker processes. Each task's token ids are appended raw (2 or 4
   bytes a token) to its process's ids file in ``OUT/.tokpipe/seg0/kept/``, and its
   documents' ``id`` and ``length`` go to small Arrow IPC files beside it
   (``writers.ids_staging``); the task's marker, written last, records them and the byte
   range of its ids, and commits them. A rerun after a crash redoes only the tasks that had
   not finished.
2. **Shuffle, split, write** (one process, bounded memory): documents are numbered by their
   position in task order (fixed by the inputs, not by the worker count), and each gets

       key   = splitmix64(position + splitmix64(seed))       its place in the shuffled order
       split = val  when  splitmix64(key ^ C) / 2**64 < val_fraction,  else train

   The output is the documents sorted by ``key``: a uniform, seeded permutation, the same
   for any number of workers. It is computed without holding the corpus. When the staged
   ids fit in the page cache (half the machine's memory), an index of the documents (key,
   staged file, byte range, ``.bin`` pointer: about 80 bytes a document) is sorted by key
   and each run of documents is read from the staged files in that order, straight into the
   buffer the writers take (``tokpipe_core::tokens::StagedFiles``): no copy on disk, no
   memory map of the whole staging; past ``shuffle_buffer`` bytes of index this goes key
   range by key range. Larger staging is scattered by key range into B buckets (temporary
   Arrow files, written and read sequentially; B is chosen so a bucket's ids fit
   ``shuffle_buffer``), then each bucket is sorted and written out. Every gather copies a document's ids once.
   Without shuffling, documents are written in input order, and while phase 1 still runs:
   a thread takes each task's staged documents as soon as that task and all before it are
   done.

   The Megatron pair is not rewritten in shuffled order: its ``.bin`` holds each split's
   documents in input order and its ``.idx`` lists them in shuffled order, each at its byte
   position (``sinks.BinLayout``). When one process staged every task in order (one worker) and
   there is no validation split and no truncation, the staged ids file *is* the train
   ``.bin``, published as a hard link: the ids are written once. Otherwise (several
   workers, a resumed run, ``val_fraction``, ``truncate``) the ``.bin`` is copied together
   in input order, to the same bytes (``shuffle.write_bins``).

   Staging files and task markers are not fsynced: a killed process resumes exactly, and
   after a power loss a task whose staging came back short (the marker records each meta
   file's size and the end of its ids range) or whose meta files came back zero-filled is
   found on resume and redone (``RunState.committed`` in ``engines.state``, and
   ``staging.IdsStaging``). The raw ids have no magic bytes to check: ids zero-filled within
   the file's length are not detected (ext4's default ``data=ordered`` mode writes data
   before the size that exposes it).

Outputs, per split (``train``, ``val``); each split's folder holds its Parquet shards alone,
so ``pyarrow.dataset.dataset(OUT/train)`` opens it with no option:

* ``OUT/{split}/part-00000-NNNNN.parquet``: ``id``, ``input_ids`` (list<uint16> when vocab_size <= 65536,
  else list<uint32>) and ``length`` per document; or, with ``pack``, rows of exactly
  ``seq_len + 1`` tokens (``input_ids``; ``length`` = real tokens in the row; written by
  ``tokpipe_core::packed_parquet``, the same file pyarrow writes), so a training
  step takes ``inputs = row[:-1]`` and ``targets = row[1:]``. Rows are disjoint consecutive
  slices of the stream of documents, each followed by its EOS; a document longer than a row
  runs on into the next rows (or, with ``truncate``, is cut to ``seq_len + 1`` tokens first).
  The last partial row is dropped and its tokens counted (``dropped_tail_tokens``), or with
  ``pad_tail`` filled with EOS (the ``length`` column says how many tokens are real).
* ``OUT/megatron/{split}.bin`` / ``.idx``: Megatron-LM's indexed dataset, one sequence per
  document (Megatron's GPTDataset packs documents into samples itself, so packing does not
  apply to it; truncation does), listed in output order over a ``.bin`` in input order
  (see above; megatron-core reads each sequence at its pointer).
* ``OUT/documents/{split}.parquet``: ``id`` and ``length`` of every document in output order
  (what ``tokpipe stats`` reads, and the provenance of each row; the manifest's
  ``documents_file``).

``OUT/README.md`` is the dataset card (``writers.card``): ``configs:`` that make the folder an
HF dataset (splits ``train`` and ``validation``; a ``documents`` config), and a summary.
``OUT/manifest.json`` (written last) has per shard and per split the documents and tokens,
the dtype, the tokenizer file and its sha256, the EOS id, seq_len, seed and split fraction,
and under ``files`` every file the run published (the shards, each split's documents file and
Megatron pair, ``errors.jsonl``) with its size and sha256, which
``writers.manifest.verify_tokenized`` (``tokpipe stats --verify``) checks; and the run's
identity digest and input files (``engines.state``), by which a rerun of the same command
finds the run done once its staging is removed (after the manifest; ``--keep-staging`` keeps
it, for a rewrite with other write options that skips phase 1). The digests cost
no second pass where the bytes go through Python anyway: the ``.idx``, and a ``.bin`` copied
into place (hashed on a thread beside the copy). Parquet files are read once after they are closed, and a ``.bin``
linked to the staging is read once on a thread of its own while the shuffle writes the rest.

The modules: ``options`` (what is asked, the output format), ``keys`` (the shuffle's
arithmetic), ``staging`` (phase 1's staging strategy and its read-back), ``sinks`` (the
writers of a split), ``shuffle`` (phase 2's writes) and ``run`` (the driver).
"""

from tokpipe.pipeline.tokenize.keys import shuffle_keys, val_mask
from tokpipe.pipeline.tokenize.options import (FORMAT, FORMAT_VERSION, SPLITS, TokenizeOptions, TokenizeResult,
                                               read_tokenized_manifest)
from tokpipe.pipeline.tokenize.run import tokenize_corpus
from tokpipe.pipeline.writers.manifest import verify_tokenized

__all__ = ["TokenizeOptions", "TokenizeResult", "tokenize_corpus", "shuffle_keys", "val_mask", "FORMAT",
           "FORMAT_VERSION", "SPLITS", "read_tokenized_manifest", "verify_tokenized"]
