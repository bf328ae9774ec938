"""``pii``: finds personal data and secrets in each document and replaces them, with the spans
in a metadata column.

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
"""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa

from tokpipe import _core
from tokpipe.errors import InvalidArgumentError
from tokpipe.pipeline.base import Stage, StageResult, register
from tokpipe.pipeline.documents import TEXT, replace_text, set_column
from tokpipe.pipeline.kernels import string_buffers

__all__ = ["Pii", "PII_TYPES", "ACTIONS", "pii_spans"]

#: The PII types, in the kernel's order.
PII_TYPES: tuple[str, ...] = tuple(_core.pii_types())
ACTIONS = ("tag", "mask", "hash", "dummy", "drop_doc", "keep")
DEFAULT_SALT = "tokpipe-pii"


def pii_spans(text: str, types: list[str] | tuple[str, ...] = PII_TYPES,
              only_public_ip: bool = False) -> list[tuple[str, int, int]]:
    """(type, start, end) of each PII span of ``text`` (code points), overlaps resolved."""
    return [tuple(s) for s in _core.pii_find(text, list(types), only_public_ip)]


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
    spans, in code points of the original text). See the module documentation for each
    detector's rules."""

    name = "pii"

    def __init__(self, types: list[str] | None = None, action: str = "tag", actions: dict[str, str] | None = None,
                 only_public_ip: bool = False, salt: str = DEFAULT_SALT, salt_env: str | None = None,
                 max_per_1000_chars: float = 0.0, metadata_column: str = "pii") -> None:
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
        self.types = types
        self.action = action
        self.actions = actions
        self.only_public_ip = only_public_ip
        self.salt = salt
        self.salt_env = salt_env
        self._salt = salt_value
        self.max_per_1000_chars = float(max_per_1000_chars)
        self.metadata_column = metadata_column
        self._per_type = per_type

    def scrub(self, text: pa.Array | pa.ChunkedArray) -> tuple[pa.Array, pa.Array, dict[str, np.ndarray], np.ndarray]:
        """(scrubbed text, metadata JSON, spans per type per row, drop flag per row)."""
        offsets, data, wide = string_buffers(text)
        names = list(self._per_type)
        new_offsets, new_data, meta_offsets, meta_data, counts, drops = _core.pii_scrub(
            offsets, data, wide, names, [self._per_type[t] for t in names], self.only_public_ip, self._salt,
            self.max_per_1000_chars)
        n = len(offsets) - 1
        new_text = pa.LargeStringArray.from_buffers(n, pa.py_buffer(new_offsets), pa.py_buffer(new_data))
        meta = pa.LargeStringArray.from_buffers(n, pa.py_buffer(meta_offsets), pa.py_buffer(meta_data))
        if not wide:
            new_text = new_text.cast(pa.string())
            meta = meta.cast(pa.string())
        raw = np.frombuffer(counts, dtype="<u8").reshape(len(PII_TYPES), n)
        per_type = {t: raw[i] for i, t in enumerate(PII_TYPES)}
        return new_text, meta, per_type, np.frombuffer(drops, dtype=np.uint8).astype(bool)

    def apply(self, batch: pa.RecordBatch) -> StageResult:
        new_text, meta, per_type, drops = self.scrub(batch.column(TEXT))
        for t, c in per_type.items():
            if t in self._per_type:
                self.stats.extra[f"pii_{t}"] += int(c.sum())
        batch = set_column(batch, self.metadata_column, meta)
        # Rejected documents are scrubbed too: whatever keeps them must not get the PII back.
        return self.reject(replace_text(batch, new_text), ~drops, "pii_density")
