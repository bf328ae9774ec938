"""``pii``: finds personal data and secrets in each document and replaces them, with the spans
in a metadata column.
(Over 500 lines: 140 of them are this docstring, the rule of every detector, kept beside the
options that name them; the rest is one stage and its option checks.)

The detectors run in Rust over the Arrow text buffers on all cores
(``rust/tokpipe-core/src/pii/``). Each starts from a cheap trigger (``@``, ``://``, ``:``,
runs of digits, the literal prefixes of secrets), so a document without candidates costs one
pass, and keeps a candidate only when its validator passes:

===================  ==========================================================================
``email``            ``local@domain.tld`` (ASCII), not in a URL's user info (``//`` or
                     ``scheme:`` before it; ``mailto:`` is an address), not followed by
                     ``:`` and a path, ``~`` or ``$`` (``user@host:~$`` prompts,
                     ``git@github.com:org/repo`` remotes), not an image name (``icon@2x.png``)
``ip_address``       IPv4 dotted quads (octets 0-255, no leading zeros) and IPv6 addresses
                     (as Rust's ``Ipv6Addr`` parses them, with a digit and two colons);
                     ``only_public_ip`` keeps only public ones (not private, loopback,
                     link-local, shared, documentation, multicast, reserved)
``phone``            ``+`` and a country code with 8 to 15 digits in all (E.164, with spaces,
                     dots, dashes or a parenthesised group; 11 for ``+1``; the last group of
                     two digits or more); US/NANP ``(415) 555-0132``,
                     ``415-555-0132``, ``415.555.0132``, ``1-800-...`` (area code and exchange
                     2-9); mainland China mobiles ``1[3-9]x xxxx xxxx`` (unseparated, or
                     3-4-4 with spaces or dashes) and landlines ``0AA(A)-NNNNNNN(N)``
``credit_card``      13 to 19 digits, unseparated or in the printed groupings (4-4-4-4[-x],
                     4-6-5, 4-6-4, by one space or dash), with a Visa, Mastercard, Amex,
                     Discover, JCB, Diners, UnionPay or Maestro prefix and length, and Luhn
``china_id``         18 characters: province 11-82, a valid birth date, the ISO 7064 MOD 11-2
                     check character (``X`` for 10)
``us_ssn``           ``AAA-GG-SSSS`` with dashes (a bare 9-digit number is too ambiguous),
                     never area 000, 666 or 9xx, group 00 or serial 0000
``iban``             a country code, check digits and the country's registered length,
                     unspaced or in groups of four, ISO 7064 MOD 97-10
``secret``           AWS access key ids (``AKIA``/``ASIA``...), GitHub tokens (``ghp_`` ``gho_``
                     ``ghu_`` ``ghs_`` ``ghr_`` ``github_pat_``), GitLab ``glpat-``, Slack
                     ``xox[baprs]-``, JWTs (``eyJ...eyJ...sig``), PEM private-key blocks (the
                     whole block), and the *value* of ``api_key = "..."``, ``password: ...``,
                     ``token=...``, ``client_secret``... assignments (at least 6 characters, no
                     placeholder such as ``${VAR}``, ``<...>``, ``None``, ``changeme``, ``os.environ``;
                     unquoted values must mix two of lower case, upper case and digits and
                     not start with ``-``)
``url_credentials``  ``scheme://user:password@host``: the span is the whole user info,
                     ``user:password`` (the user name is often a person's)
``mac_address``      six hex pairs all separated by ``:`` or all by ``-`` (not all-zero or
                     broadcast)
===================  ==========================================================================

**Not PII, by rule**: ``git@host`` addresses (a forge's SSH service account, never a person;
``git@github.com:org/repo`` is an SSH remote) and the generic senders ``noreply``,
``no-reply``, ``donotreply``, ``do-not-reply`` and ``mailer-daemon`` at any domain. GitHub's
per-user no-reply addresses (``12345+octocat@users.noreply.github.com``) **are** PII: they name
an account, and are scrubbed like any address.

**Version strings** are not IPv4 addresses: a dotted quad is skipped when glued to a letter,
digit or another dotted number (``v1.2.3.4``, ``1.2.3.4.5``), when the word before it is a
version or numbering word (``version``, ``v``, ``release``, ``rev``, ``build``, ``bump``,
``update``, ``upgrade``, ``tag``, ``section``, ``chapter``, ...), when its line holds another
dotted number within 80 characters of 3 or 5+ parts (``1.2.3.4 ... since 1.2.3``; not a
``415.555.0132`` phone number) or written ``v1.2``, is a Markdown heading
(``## 1.2.3.4``), is underlined (an RST heading), or opens with it followed by `` (``
(``1.2.3.4 (2021-03-04)``). Dates, ISBNs, DOIs, UUIDs, hex digests and tables of numbers
fail the shapes and checksums above.

**Out of scope**: obfuscated addresses (``bob [at] example [dot] com``, percent-encoded or
HTML-entity ``mailto:`` links), non-ASCII (internationalised) e-mail addresses, names, street
addresses and other PII that needs a language model rather than a validator.

**Overlaps** are resolved deterministically: the longest span wins; equal lengths go to the
type first in ``secret, url_credentials, email, iban, china_id, credit_card, us_ssn, phone,
ip_address, mac_address``, then to the earlier start.

**Offsets** are Unicode code points of the original text (Python ``str`` indices), so
``text[start:end]`` is the match.

**Actions**, per type (``action`` for all, ``actions`` to override some):

- ``tag`` (default): ``<EMAIL>``, ``<IP_ADDRESS>``, ``<PHONE>``, ``<CREDIT_CARD>``,
  ``<CHINA_ID>``, ``<US_SSN>``, ``<IBAN>``, ``<SECRET>``, ``<URL_CREDENTIALS>``,
  ``<MAC_ADDRESS>``;
- ``mask``: every ASCII letter and digit becomes ``*``, separators stay (``***-**-****``);
- ``hash``: ``<EMAIL:h>``, ``h`` the 16 hex digits of
  ``hashlib.blake2b(salt.encode() + b"\\0" + match.encode(), digest_size=8)``: the same match
  gives the same value in every run with the same ``salt``. The default salt is the public
  ``"tokpipe-pii"``; set your own, kept secret, or the hashes of guessable values (phone numbers)
  can be reversed by trying them. ``salt`` is a parameter, so it is written to the run's
  manifest with the config; ``salt_env`` names an environment variable to read it from
  instead (only the variable's name is recorded);
- ``dummy``: a fixed value per type: ``email@example.com`` and ``22.214.171.124`` (datatrove's
  ``PIIFormatter`` first replacements), ``2001:db8::1`` for IPv6, ``+1 555-555-0100``,
  ``4111111111111111``, ``11010519491231002X``, ``123-45-6789``, ``GB82WEST12345698765432``,
  ``REDACTED`` (secrets), ``user:password``, ``00:00:5e:00:53:00``;
- ``drop_doc``: the document is dropped (reason ``pii_density``) when its spans of ``drop_doc``
  types number more than ``max_per_1000_chars`` per 1,000 characters (default 0: any one);
  they are tagged in the documents that are kept, and in the rejected ones;
- ``keep``: only reported in the metadata.

**Output**: the metadata column (``metadata_column``, default ``pii``) holds, for every document,
a JSON string ``{"counts": {"email": 2}, "spans": [["email", 10, 27], ...]}`` (counts of the
types found; spans in code points of the original text). Nothing a detector found is ever put
in a log, an error or the stats: the stats only count spans per type (``pii_<type>``).

**Beyond the text** (the user's manual is ``docs/pii.md``):

- ``fields`` (default ``all``): every other string field is scrubbed with the same types and
  actions, at the top level or nested in structs, lists, fixed-size lists, maps (keys and
  values), dictionary-encoded, string-view and extension columns (``meta.phone``;
  ``authors.email`` for a list of structs). A JSON text column (Arrow's JSON extension type)
  is scrubbed as text, all of it, and stays JSON: a row the text scrub would leave invalid
  is redone from its parsed value. ``drop_doc`` types are tagged there: only the text
  decides a drop. A list names
  the fields instead (``[author_email, meta.phone]``; a struct or list field means all the
  strings in it; a name a batch lacks is skipped, since inputs differ in their fields);
  ``text`` is scrubbed whether it is listed or not. A document with finds there gets
  ``"fields": {"meta.phone": {"phone": 1}}`` (counts per field and type) at the end of its
  metadata, and the stats count them (``pii_in_fields``, besides the text's ``pii_<type>``).
  Not scanned: binary columns, and union, list-view and run-end-encoded columns. The walk
  is per column (Arrow child arrays), never per document; the kernel does each string column.
- Ids (``id_action``): ``id``, a rejected duplicate's ``duplicate_of`` and ``minhash_dedup``'s
  ``dup_cluster`` hold ids, and ids must stay unique (a tag would make many ids one) and stay
  equal to each other (``duplicate_of`` names the kept copy's ``id``). So an id is replaced
  whole by ``pii-`` and 32 hex digits, the BLAKE2b-128 of the salt, a NUL byte and the id
  (``hashed_id``): a function of the id and the salt alone, so the same in every run, worker
  and engine, in ``duplicate_of`` as in the kept copy's ``id``. ``hash`` (default) replaces
  the ids in which a detector finds a type whose action is not ``keep`` (a numeric id that
  passes as a card or phone number too), ``hash_all`` every id, ``keep`` none. An id already
  of the ``pii-`` form is left alone: scrubbing a scrubbed output again changes no id. Stats:
  ``pii_ids_hashed``. Ids are never scrubbed as a field.
- Rejected documents: what a stage before this one drops never passes through it.
  ``scrub_rejected`` (default true) has the executor (``Stage.rewrites_rejected``; the local
  and the Ray engine alike) scrub those documents as kept ones (text, fields, ids and
  ``duplicate_of``; the metadata column added) before they go to ``rejected/``; their
  ``reason`` and ``stage`` are left alone. With ``scrub_rejected: false`` after a stage that
  can drop documents, the config raises a ``tokpipe.errors.ConfigWarning``. What this stage
  drops (``drop_doc``) is scrubbed either way.

``tokpipe tokenize`` runs no stage but ``tokenize``: its documents files
(``documents/{split}.parquet``) copy the input's ids as they are. Tokenize the output of a ``tokpipe clean`` run with this stage.

(A long module: a third of it is this documentation, which users read here, and the walk
through nested fields stays beside the stage whose rules it applies.)
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from typing import Any, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tokpipe.errors import InvalidArgumentError
from tokpipe.pipeline.base import DUPLICATE_OF, REASON, REGISTRY, STAGE, GlobalStage, Stage, StageResult, register
from tokpipe.pipeline.documents import ID, TEXT, replace_text, set_column
from tokpipe.pipeline.fields import is_json
from tokpipe.pipeline.kernels import PII_TYPES, arrow_of, exact_dedup_keys, numpy_of, pii_find, pii_scrub

__all__ = ["Pii", "PII_TYPES", "ACTIONS", "ID_ACTIONS", "pii_spans", "hashed_id"]

ACTIONS = ("tag", "mask", "hash", "dummy", "drop_doc", "keep")
ID_ACTIONS = ("hash", "hash_all", "keep")
DEFAULT_SALT = "tokpipe-pii"
#: What a replaced id starts with; 32 hex digits follow.
HASHED_ID_PREFIX = "pii-"
_HASHED_ID = r"^pii-[0-9a-f]{32}$"
_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)

#: What ``fields`` wants under a column: everything (None), or the paths below it.
_Wanted = Union[None, list[tuple[str, ...]]]
#: What a walk found: (field path, spans per PII type per document), fields with finds only.
_Found = list[tuple[str, np.ndarray]]


def pii_spans(text: str, types: list[str] | tuple[str, ...] = PII_TYPES,
              only_public_ip: bool = False) -> list[tuple[str, int, int]]:
    """(type, start, end) of each PII span of ``text`` (code points), overlaps resolved."""
    return pii_find(text, types, only_public_ip)


def hashed_id(value: str, salt: str = DEFAULT_SALT) -> str:
    """The id the ``pii`` stage puts in place of ``value``: ``pii-`` and the hex BLAKE2b-128 of
    the salt, a NUL byte and ``value`` (to find a document by the id it had)."""
    return HASHED_ID_PREFIX + hashlib.blake2b(salt.encode() + b"\0" + value.encode(), digest_size=16).hexdigest()


def _hashed_ids(ids: pa.Array, salt: str) -> pa.Array:
    """``hashed_id`` of every value (none null), without a Python call per id: the salted
    values hashed by the exact-dedup kernel (BLAKE2b-128 of the bytes when it neither lower-
    cases nor collapses spaces), the digests spelled in hex by a table lookup."""
    wide = pa.large_string()
    salted = pc.binary_join_element_wise(pa.scalar(salt + "\0", wide), ids.cast(wide), pa.scalar("", wide))
    digests = np.frombuffer(exact_dedup_keys(salted, False, False).buffers()[1], dtype=np.uint8)
    digests = digests[:16 * len(ids)].reshape(-1, 16)
    start = len(HASHED_ID_PREFIX)
    width = start + 32
    chars = np.empty((len(ids), width), dtype=np.uint8)
    chars[:, :start] = np.frombuffer(HASHED_ID_PREFIX.encode(), dtype=np.uint8)
    chars[:, start::2] = _HEX[digests >> 4]
    chars[:, start + 1::2] = _HEX[digests & 15]
    offsets = np.arange(0, width * (len(ids) + 1), width, dtype=np.int32)
    return pa.StringArray.from_buffers(len(ids), pa.py_buffer(offsets), pa.py_buffer(chars.tobytes()))


def _id_columns() -> frozenset[str]:
    """Columns whose values are document ids: ``id``, ``duplicate_of``, and the cluster column
    of each registered global stage (``minhash_dedup``'s ``dup_cluster``). The built-in stages
    are all registered by then: importing this module imports ``tokpipe.pipeline.stages``,
    which imports every one of them, before any ``Pii`` is built."""
    clusters = {cls.cluster_column for cls in REGISTRY.snapshot().values()
                if issubclass(cls, GlobalStage) and cls.cluster_column}
    return frozenset({ID, DUPLICATE_OF, *clusters})


def _below(wanted: _Wanted, name: str) -> _Wanted | bool:
    """What ``fields`` wants under the child ``name`` of a column it wants ``wanted`` of:
    everything (None), some paths, or nothing (False)."""
    if wanted is None:
        return None
    rest = [path[1:] for path in wanted if path[0] == name]
    if not rest:
        return False
    return None if any(not path for path in rest) else rest


def _per_list(counts: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Per-value counts (types x values) summed per list (types x lists), by ``offsets``."""
    running = np.zeros((counts.shape[0], counts.shape[1] + 1), dtype=np.uint64)
    np.cumsum(counts, axis=1, out=running[:, 1:])
    return running[:, offsets[1:]] - running[:, offsets[:-1]]


def _with_field_counts(meta: pa.Array, found: _Found) -> pa.Array:
    """The metadata JSON of each document with finds outside its text, given a last key
    ``"fields": {path: {type: count}}``; the others' JSON (the kernel's) is left as it is, so
    the metadata of a document with PII in its text alone is what it always was."""
    rows = np.flatnonzero(np.any([c.any(axis=0) for _, c in found], axis=0))
    merged = []
    for text, row in zip(meta.take(pa.array(rows)).to_pylist(), rows.tolist()):
        fields = {}
        for path, counts in found:
            here = {t: int(counts[i, row]) for i, t in enumerate(PII_TYPES) if counts[i, row]}
            if here:
                fields[path] = here
        merged.append(text[:-1] + ',"fields":' + json.dumps(fields, separators=(",", ":")) + "}")
    mask = np.zeros(len(meta), dtype=bool)
    mask[rows] = True
    return pc.replace_with_mask(meta, pa.array(mask), pa.array(merged, type=meta.type))


@register
class Pii(Stage):
    """Finds e-mail addresses, IP addresses, phone numbers, payment cards, China resident IDs,
    US SSNs, IBANs, secrets, URL credentials and MAC addresses (``types``, default all) and
    replaces each by its action (``action`` for every type, ``actions`` a mapping of type to
    action for some): ``tag``, ``mask``, ``hash`` (salted with ``salt``, or the environment
    variable named by ``salt_env``), ``dummy``,
    ``drop_doc`` (drops the document, reason ``pii_density``, above ``max_per_1000_chars``
    such spans per 1,000 characters) or ``keep``. ``only_public_ip`` leaves private, loopback
    and reserved addresses. Adds the ``pii`` metadata column (JSON: counts per type and the
    spans, in code points of the original text). ``fields`` (default ``all``: every string
    field, nested ones too) are scrubbed as the text is; ids are replaced whole by a salted
    hash (``id_action``: ``hash`` those with PII, ``hash_all``, ``keep``); ``scrub_rejected``
    (default true) scrubs what earlier stages drop before it goes to rejected/. See the
    module documentation for each detector's rules and for what is covered."""

    name = "pii"

    def __init__(self, types: list[str] | None = None, action: str = "tag", actions: dict[str, str] | None = None,
                 only_public_ip: bool = False, salt: str = DEFAULT_SALT, salt_env: str | None = None,
                 max_per_1000_chars: float = 0.0, metadata_column: str = "pii", fields: str | list[str] = "all",
                 id_action: str = "hash", scrub_rejected: bool = True) -> None:
        chosen = list(PII_TYPES) if types is None else list(types)
        if isinstance(types, str):
            raise InvalidArgumentError("pii: types is a list of type names, not a string")
        for t in chosen:
            if t not in PII_TYPES:
                raise InvalidArgumentError(f"pii: no type {t!r} (types are {', '.join(PII_TYPES)})")
        if not chosen:
            raise InvalidArgumentError("pii: types is empty")
        if action not in ACTIONS:
            raise InvalidArgumentError(f"pii: no action {action!r} (actions are {', '.join(ACTIONS)})")
        per_type = dict.fromkeys(chosen, action)
        for t, a in (actions or {}).items():
            if t not in per_type:
                raise InvalidArgumentError(f"pii: actions names {t!r}, which is not one of the types")
            if a not in ACTIONS:
                raise InvalidArgumentError(f"pii: no action {a!r} for {t} (actions are {', '.join(ACTIONS)})")
            per_type[t] = a
        if not isinstance(salt, str):
            raise InvalidArgumentError("pii: salt must be a string")
        if salt_env is not None:
            # Read once here; worker processes inherit the environment. The value itself is
            # never stored in the stage's parameters (they go to the manifest).
            if not os.environ.get(salt_env):
                raise InvalidArgumentError(f"pii: salt_env names {salt_env!r}, which is not set or empty")
            salt_value = os.environ[salt_env]
        else:
            salt_value = salt
        if isinstance(max_per_1000_chars, bool) or not max_per_1000_chars >= 0:
            raise InvalidArgumentError(f"pii: max_per_1000_chars must be >= 0, not {max_per_1000_chars}")
        if isinstance(fields, str):
            if fields != "all":
                raise InvalidArgumentError(f"pii: fields is 'all' or a list of field names, not {fields!r}")
        elif not isinstance(fields, (list, tuple)) or not all(isinstance(f, str) and f for f in fields):
            raise InvalidArgumentError("pii: fields is 'all' or a list of field names")
        else:
            ids = sorted(set(fields) & _id_columns())
            if ids:
                raise InvalidArgumentError(f"pii: fields names {ids[0]!r}, which holds ids: id_action says what "
                                           "becomes of ids")
        if id_action not in ID_ACTIONS:
            raise InvalidArgumentError(f"pii: no id_action {id_action!r} (id actions are {', '.join(ID_ACTIONS)})")
        if not isinstance(scrub_rejected, bool):
            raise InvalidArgumentError("pii: scrub_rejected must be true or false")
        self.types = types
        self.action = action
        self.actions = actions
        self.only_public_ip = only_public_ip
        self.salt = salt
        self.salt_env = salt_env
        self._salt = salt_value
        self.max_per_1000_chars = float(max_per_1000_chars)
        self.metadata_column = metadata_column
        self.fields = fields if isinstance(fields, str) else list(fields)
        self.id_action = id_action
        self.scrub_rejected = scrub_rejected
        self._per_type = per_type
        # The types that change what they find: an id holding one of them is replaced.
        self._acting = np.array([per_type.get(t, "keep") != "keep" for t in PII_TYPES])
        self._id_columns = _id_columns()

    def scrub(self, text: pa.Array | pa.ChunkedArray) -> tuple[pa.Array, pa.Array, dict[str, np.ndarray], np.ndarray]:
        """(scrubbed text, metadata JSON, spans per type per row, drop flag per row)."""
        names = list(self._per_type)
        scrubbed = pii_scrub(text, names, [self._per_type[t] for t in names], self.only_public_ip, self._salt,
                             self.max_per_1000_chars)
        per_type = {t: scrubbed.counts[i] for i, t in enumerate(PII_TYPES)}
        return scrubbed.text, scrubbed.metadata, per_type, scrubbed.drops

    def apply(self, batch: pa.RecordBatch) -> StageResult:
        batch, drops = self._scrub_batch(batch, frozenset(), count=True)
        # Rejected documents are scrubbed too: whatever keeps them must not get the PII back.
        return self.reject(batch, ~drops, "pii_density")

    def may_reject(self) -> bool:
        return "drop_doc" in self._per_type.values()

    def rewrites_rejected(self) -> bool:
        return self.scrub_rejected

    def rewrite_rejected(self, rejected: pa.RecordBatch) -> pa.RecordBatch:
        # `reason` and `stage` are the executor's, not the document's: left as they are.
        return self._scrub_batch(rejected, frozenset({REASON, STAGE}), count=False)[0]

    def config_warnings(self, earlier: Sequence[Stage]) -> list[str]:
        if self.scrub_rejected:
            return []
        droppers = list(dict.fromkeys(s.name for s in earlier if s.may_reject()))
        if not droppers:
            return []
        return [f"scrub_rejected is false, so what {', '.join(droppers)} drop(s) goes to rejected/ with its "
                "personal data (text, fields, ids and duplicate_of); set scrub_rejected: true to scrub it too"]

    def _scrub_batch(self, batch: pa.RecordBatch, skip: frozenset[str],
                     count: bool) -> tuple[pa.RecordBatch, np.ndarray]:
        """``batch`` with its text, fields and ids scrubbed and the metadata column set, and
        each document's drop flag (decided by its text alone); ``count`` adds to the stats."""
        new_text, meta, per_type, drops = self.scrub(batch.column(TEXT))
        found: _Found = []
        in_fields = hashed = 0
        paths = self._paths(batch.schema)
        for index, field in enumerate(batch.schema):
            name = field.name
            if name in (TEXT, self.metadata_column) or name in skip:
                continue
            column = batch.column(index)
            if name in self._id_columns:
                new, here, replaced = self._scrub_ids(column, name)
                hashed += replaced if name == ID else 0
            else:
                wanted = None if paths is None else _below(paths, name)
                if wanted is False:
                    continue
                new, here = self._walk(column, name, wanted)
                in_fields += sum(int(c.sum()) for _, c in here)
            if new is not column:
                batch = batch.set_column(index, name, new)
            found += here
        if count:
            for t, c in per_type.items():
                if t in self._per_type:
                    self.stats.extra[f"pii_{t}"] += int(c.sum())
            self.stats.extra["pii_in_fields"] += in_fields
            self.stats.extra["pii_ids_hashed"] += hashed
        if found:
            meta = _with_field_counts(meta, found)
        batch = set_column(batch, self.metadata_column, meta)
        return replace_text(batch, new_text), drops

    def _paths(self, schema: pa.Schema) -> list[tuple[str, ...]] | None:
        """``fields`` as paths into ``schema`` (None: every field). A name that is a top-level
        column is that column, dots and all; otherwise dots separate nested fields."""
        if isinstance(self.fields, str):
            return None
        return [(f,) if f in schema.names else tuple(f.split(".")) for f in self.fields]

    def _strings(self, column: pa.Array) -> tuple[pa.Array, np.ndarray]:
        """A string column scrubbed (the same array when nothing was found) and its spans per
        type per row."""
        new, _, per_type, _ = self.scrub(column)
        counts = np.stack([per_type[t] for t in PII_TYPES])
        if not counts.any():
            return column, counts
        if column.null_count:  # the kernel reads a null as empty text; it stays null
            new = pc.if_else(column.is_valid(), new, pa.scalar(None, new.type))
        return new, counts

    def _walk(self, column: pa.Array | pa.ChunkedArray, path: str, wanted: _Wanted) -> tuple[pa.Array, _Found]:
        """``column`` with the strings ``wanted`` in it scrubbed (the same array when none
        changed), and the spans found per field path, per row of ``column``."""
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        kind = column.type
        if pa.types.is_string(kind) or pa.types.is_large_string(kind):
            if wanted is not None:  # a path that goes on below a string names nothing
                return column, []
            new, counts = self._strings(column)
            return new, ([(path, counts)] if counts.any() else [])
        if pa.types.is_string_view(kind):
            new, found = self._walk(column.cast(pa.large_string()), path, wanted)
            return (new.cast(kind) if found else column), found
        if isinstance(kind, pa.BaseExtensionType):
            if isinstance(kind, pa.JsonType):
                # JSON text has no columns to choose from: a path into it means all of it.
                storage, found = self._walk(column.storage, path, None)
                if found:
                    storage = self._still_json(column.storage, storage)
            else:
                storage, found = self._walk(column.storage, path, wanted)
            if not found:
                return column, []
            return pa.ExtensionArray.from_storage(kind, storage), found
        if pa.types.is_dictionary(kind):
            dictionary, found = self._walk(column.dictionary, path, wanted)
            if not found:
                return column, []
            indices = column.indices
            rows = indices.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
            valid = indices.is_valid().to_numpy(zero_copy_only=False)
            return (pa.DictionaryArray.from_arrays(indices, dictionary, ordered=kind.ordered),
                    [(p, c[:, rows] * valid) for p, c in found])
        mask = column.is_null() if column.null_count else None
        if pa.types.is_struct(kind):
            children, found = [], []
            for i, child_field in enumerate(kind):
                child = column.field(i)
                below = _below(wanted, child_field.name)
                if below is not False:
                    child, here = self._walk(child, f"{path}.{child_field.name}", below)
                    found += here
                children.append(child)
            if not found:
                return column, []
            return pa.StructArray.from_arrays(children, fields=list(kind), mask=mask), found
        if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_map(kind):
            # `values` is the whole child array, and `offsets` (of this slice) point into it;
            # a map's child is its struct of keys and values.
            values, found = self._walk(column.values, path, wanted)
            if not found:
                return column, []
            bounds = numpy_of(column.offsets)
            # A fresh offsets array: pyarrow takes no null mask with the offsets of a slice.
            offsets = arrow_of(bounds)
            if pa.types.is_map(kind):
                rebuilt = pa.MapArray.from_arrays(offsets, values.field(0), values.field(1), type=kind, mask=mask)
            else:
                rebuilt = type(column).from_arrays(offsets, values, type=kind, mask=mask)
            return rebuilt, [(p, _per_list(c, bounds)) for p, c in found]
        if pa.types.is_fixed_size_list(kind):
            size = kind.list_size
            values, found = self._walk(column.values.slice(column.offset * size, len(column) * size), path, wanted)
            if not found:
                return column, []
            return (pa.FixedSizeListArray.from_arrays(values, type=kind, mask=mask),
                    [(p, c.reshape(c.shape[0], len(column), size).sum(axis=2)) for p, c in found])
        return column, []  # numbers, binary, and the types the module documentation lists

    def _still_json(self, before: pa.Array, after: pa.Array) -> pa.Array:
        """``after`` (JSON texts scrubbed as text) with each row that no longer parses redone
        from ``before`` by parsing it and scrubbing its strings (compact JSON). A replacement
        holds no quote or backslash, but a span can take in part of an escape: an unquoted
        secret that runs into an escaped backslash and quote."""
        changed = np.flatnonzero(pc.not_equal(before, after).fill_null(False).to_numpy(zero_copy_only=False))
        # Checked without recursion: a field's value may be JSON text nested thousands deep
        # (``fields.MAX_NESTING``), which json.loads cannot read.
        broken = [row for row, text in zip(changed.tolist(), after.take(pa.array(changed)).to_pylist())
                  if not is_json(text)]
        if not broken:
            return after
        texts = []
        for row in broken:  # rare: one kernel call each is nothing
            try:
                value = self._scrubbed_values([json.loads(before[row].as_py())])[0]
                texts.append(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
            except RecursionError:
                # Too deep to take apart: kept as a JSON string of its scrubbed text.
                texts.append(json.dumps(after[row].as_py(), ensure_ascii=False))
        mask = np.zeros(len(after), dtype=bool)
        mask[broken] = True
        return pc.replace_with_mask(after, pa.array(mask), pa.array(texts, type=after.type))

    def _scrubbed_values(self, values: list[Any]) -> list[Any]:
        """Parsed JSON values with every string in them, object keys too, scrubbed (by one
        kernel call over all of them, in the order ``collect`` meets them)."""
        strings: list[str] = []

        def collect(value: Any) -> None:
            if isinstance(value, str):
                strings.append(value)
            elif isinstance(value, list):
                for item in value:
                    collect(item)
            elif isinstance(value, dict):
                for key, item in value.items():
                    strings.append(key)
                    collect(item)

        for value in values:
            collect(value)
        scrubbed = iter(self.scrub(pa.array(strings, type=pa.large_string()))[0].to_pylist())

        def rebuild(value: Any) -> Any:
            if isinstance(value, str):
                return next(scrubbed)
            if isinstance(value, list):
                return [rebuild(item) for item in value]
            if isinstance(value, dict):
                return {next(scrubbed): rebuild(item) for item in value.values()}
            return value

        return [rebuild(value) for value in values]

    def _scrub_ids(self, column: pa.Array | pa.ChunkedArray, name: str) -> tuple[pa.Array, _Found, int]:
        """An id column with the ids ``id_action`` replaces hashed whole (``hashed_id``), the
        spans found in it, and how many ids were replaced."""
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        kind = column.type
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)) or not len(column):
            return column, [], 0
        _, _, per_type, _ = self.scrub(column)
        counts = np.stack([per_type[t] for t in PII_TYPES])
        valid = column.is_valid().to_numpy(zero_copy_only=False) if column.null_count else np.ones(len(column), bool)
        if self.id_action == "keep":
            replace = np.zeros(len(column), dtype=bool)
        elif self.id_action == "hash_all":
            replace = valid
        else:
            replace = valid & (counts[self._acting].sum(axis=0) > 0)
        if replace.any():
            # Our own hashes hold no PII (though a run of their digits may pass for some):
            # hashing them again would change the ids of an output scrubbed before.
            ours = pc.match_substring_regex(column, _HASHED_ID).fill_null(False).to_numpy(zero_copy_only=False)
            replace = replace & ~ours
        replaced = int(replace.sum())
        if replaced:
            chosen = pa.array(replace)
            column = pc.replace_with_mask(column, chosen, _hashed_ids(column.filter(chosen), self._salt).cast(kind))
        return column, ([(name, counts)] if counts.any() else []), replaced
