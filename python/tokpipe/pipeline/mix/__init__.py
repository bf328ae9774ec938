"""Data mixing (``tokpipe mix``): several ``tokpipe tokenize`` outputs, each with a weight,
into one shuffled ``tokenize``-style output holding exactly the requested share of tokens of
each source.

What is asked, and what is written (docs/mix.md has the user's view):

* **Weights** are relative shares of *tokens*, normalised to sum to 1 (exact fractions:
  ``0.7`` is 7/10).
* **Budget** ``N`` (``tokens``): the train split's total. By default the largest total that
  no source reaches past ``max_epochs`` passes (default 1: no upsampling):
  ``N = min_i floor(floor(max_epochs * T_i) / w_i)``, ``T_i`` the source's train tokens.
* **Per-source targets**: ``t_i = round(N * w_i)`` by the largest remainder (floors first,
  the ``N - sum(floors)`` tokens left to the largest fractional parts, ties to the source
  listed first), so they sum to ``N`` exactly. A target past ``floor(max_epochs * T_i)``
  fails before anything is written, naming the source, its tokens and the epochs needed.
* **Selection**, per source: ``t_i // T_i`` whole epochs (every document), then a partial
  epoch of ``t_i % T_i`` tokens: whole documents in the epoch's seeded order until the next
  one would reach the target, and that one cut to the tokens left (its first tokens; at most
  one document per source and split is cut, and the manifest counts it). So the realised
  tokens equal the targets exactly, and a source's realised epochs are ``t_i / T_i``. The
  partial epoch's order: document ``r`` (its position in the source split's documents file)
  has key ``splitmix64(r + splitmix64(s))`` with ``s = splitmix64((i << 32 | e) +
  splitmix64(seed))`` for source ``i`` and epoch ``e`` (``tokenize.keys.shuffle_keys``).
* **Output order**: every occurrence (source ``i``, epoch ``e``, document ``r``) is numbered
  ``p = base(i, e) + r`` (``base`` counts the documents of the earlier (source, epoch)
  pairs, sources in the order given) and the output is sorted by
  ``splitmix64(p + splitmix64(seed))``: a uniform shuffle across sources, the same bytes for
  the same sources, weights and seed (no thread or buffer size changes it).
* **Ids**: an output document's ``id`` is ``"{i}/{e}/{source id}"``, so each row names the
  source (its index in the manifest's ``mix.sources``), the epoch and the document.
* **Splits**: ``train`` as above. ``val`` is mixed only when every source has one, with the
  same weights and no repetition (its budget is the largest reachable within one epoch of
  each source's val; ``tokens`` and ``max_epochs`` apply to train): repeating held-out
  documents would only weigh some of them twice.

The data is streamed: each source's Parquet shards are read a record batch at a time, in
order, and each selected document is scattered to a key range ("bucket", a temporary Arrow
file in the run's ``shuffle`` folder, ``engines.state``) holding at most ``shuffle_buffer``
bytes of token ids; each bucket is then sorted by key and written through the same sinks as
``tokpipe tokenize`` (``tokenize.sinks.Split``: Parquet shards, the documents file, the
Megatron pair, here written in output order). Memory: the buffer, the source row group
being decoded, and about 40 bytes a source document for the selection (its length, and its
key, rank and share in the seeded part).

The output folder's run state is ``engines.state``'s (the lock, ``run.json`` with the run's
identity); every file is written under a temporary name and the manifest last, so a killed
mix leaves no finished-looking output; its rerun starts the write over (one pass, nothing
to reuse), and a rerun of a finished mix finds it done by the digest of its identity (the
sources' manifests included: a source rewritten since makes it another run).

The modules: ``plan`` (what is asked: the options, the sources and their checks, the targets
and each source's selection), ``write`` (the scatter to key ranges, the sinks, the weight
lists and the manifest) and ``run`` (the driver: the run's lock and state).
"""

from tokpipe.pipeline.mix.plan import MixOptions, MixResult, largest_remainder, parse_source
from tokpipe.pipeline.mix.run import mix
from tokpipe.pipeline.mix.write import DATA_PATH_FILES

__all__ = ["MixOptions", "MixResult", "mix", "parse_source", "largest_remainder", "DATA_PATH_FILES"]
