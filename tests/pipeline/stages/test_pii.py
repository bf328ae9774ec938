"""pii: detection against a labelled set of real paragraphs with inserted values (true spans
known by construction), the cases it must not fire on, the actions, the metadata and stats;
then what it scrubs besides the text: other fields (nested ones too), ids (hashed whole, the
same in ``duplicate_of``), and the documents that stages before it reject, on one worker or
several, and the config warning when those are left alone."""

from __future__ import annotations

import hashlib
import json
import random
import re
import warnings
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tokpipe.pipeline as pipeline
from tests.conftest import load_documents
from tests.pipeline.stages import pii_labels as labels
from tokpipe.errors import ConfigError, ConfigWarning, InvalidArgumentError
from tokpipe.pipeline.stages import registered_stages
from tokpipe.pipeline.config import parse_config
from tokpipe.pipeline.stages.pii import PII_TYPES, Pii, hashed_id, pii_spans


def batch(*texts: str) -> pa.RecordBatch:
    return pa.record_batch([pa.array(list(texts), type=pa.string())], names=["text"])


def scrub(text: str, **kw) -> str:
    return Pii(**kw).process(batch(text)).kept.column("text")[0].as_py()


@pytest.fixture(scope="module")
def labelled() -> list[tuple[str, list[labels.Label]]]:
    return labels.build([t for _, t in load_documents()], n_docs=600, seed=7)


def test_labelled_set_precision_and_recall(labelled):
    found = [pii_spans(text) for text, _ in labelled]
    scores = labels.score([lab for _, lab in labelled], found, PII_TYPES)
    for kind, (precision, recall, tp, fp, fn) in scores.items():
        assert tp >= 40, f"{kind}: the set should hold enough {kind} values ({tp})"
        assert precision >= 0.97, f"{kind}: precision {precision:.3f} (fp={fp})"
        assert recall >= 0.97, f"{kind}: recall {recall:.3f} (fn={fn})"


def test_real_web_values_labelled_by_their_markup(documents):
    # Real PII in the Common Crawl samples, labelled by the markup around it (not by the
    # detector): WARC-IP-Address headers and mailto: links must all be found, exactly.
    # Percent-encoded addresses (`mailto:%6B%79...`, an anti-spam trick) are out of scope.
    rules = [("ip_address", re.compile(r"WARC-IP-Address: (\S+)")),
             ("email", re.compile(r'href="mailto:([^"?%&]+)"'))]
    seen = {kind: 0 for kind, _ in rules}
    for _, text in documents:
        found = set(pii_spans(text))
        for kind, rule in rules:
            for m in rule.finditer(text):
                seen[kind] += 1
                assert (kind, m.start(1), m.end(1)) in found, (kind, m.group(1))
    assert seen["ip_address"] >= 10 and seen["email"] >= 10, seen


def test_spans_are_code_point_offsets(labelled):
    # text[start:end] is the inserted value, also after non-ASCII text (the corpora hold
    # Japanese and Chinese paragraphs).
    assert any(not text.isascii() for text, _ in labelled)
    for text, truth in labelled:
        found = set(pii_spans(text))
        for kind, start, end in truth:
            if (kind, start, end) in found:
                assert text[start:end] == text[start:end].strip() and text[start:end]
    text = "日本語のテキスト: 連絡先は jane.doe@example.org です。"
    [(kind, start, end)] = pii_spans(text)
    assert (kind, text[start:end]) == ("email", "jane.doe@example.org")


@pytest.mark.parametrize("text", [
    # version strings in a changelog
    "## 1.2.3.4 (2021-03-04)\n* Fixed a crash when parsing headers.",
    "1.2.3.4 (2021-03-04)\n--------------------",
    "Changes since version 10.0.0.1: none.",
    "Bumped libfoo to 2.3.1.0 and libbar to 1.0.2.",
    "Upgrade from 1.2.3.4 to 1.2.3.5 with v1.2.3.6 tools",
    "Firmware 4.19.0.12.1 is required.",
    # dates
    "Released 2020-01-01, patched 03/04/2021, again 04.03.2021 and 2024-12-31T23:59:59Z.",
    # ISBNs and DOIs
    "ISBN 978-3-16-148410-0, ISBN-10 0-306-40615-2, ISBN 9780306406157, doi:10.1038/nphys1170, "
    "https://doi.org/10.1000/182",
    # UUIDs and hex hashes
    "id 550e8400-e29b-41d4-a716-446655440000, md5 d41d8cd98f00b204e9800998ecf8427e, "
    "sha1 da39a3ee5e6b4b0d3255bfef95601890afd80709, commit 3f2a9b1c0e7d",
    # numeric tables
    "year   pop      area\n2019   1234567  89.5\n2020   1245678  89.7\n"
    "1234 5678 9012 3456 7890\n3.14159 2.71828 1.41421 1.73205\n| 415 | 555 | 0132 |",
    # e-mail-like strings in code
    "alice@devbox:~$ ls -la\nroot@web01.example.com:/var/log# tail",
    "git clone git@github.com:org/repo.git",
    "git@gitlab.example.com:group/project.git and git@github.com",
    "Reply to noreply@github.com or no-reply@accounts.google.com; see icon@2x.png",
    "std::vector<int> v; auto t = 12:30:45;",
])
def test_does_not_fire(text):
    assert pii_spans(text) == []


def test_github_user_noreply_addresses_are_pii():
    text = "Signed-off-by: Octo Cat <583231+octocat@users.noreply.github.com>"
    [(kind, start, end)] = pii_spans(text)
    assert (kind, text[start:end]) == ("email", "583231+octocat@users.noreply.github.com")


def test_mailto_and_url_userinfo():
    text = "mailto:bob.smith@example.com and https://bob:s3cr3t-Pw@db.example.com/x"
    assert [(k, text[s:e]) for k, s, e in pii_spans(text)] == [
        ("email", "bob.smith@example.com"), ("url_credentials", "bob:s3cr3t-Pw")]


def test_secret_assignments_value_only_and_placeholders():
    text = 'api_key = "sk_live_51HxYz9ABCdef"\npassword: ${DB_PASSWORD}\ntoken = os.environ["T"]'
    assert [(k, text[s:e]) for k, s, e in pii_spans(text)] == [("secret", "sk_live_51HxYz9ABCdef")]


def test_only_public_ip():
    text = "from 10.0.0.1 and 192.168.1.20 to 8.8.8.8 and fe80::1 or 2606:4700:4700::1111"
    every = [text[s:e] for _, s, e in pii_spans(text)]
    public = [text[s:e] for _, s, e in pii_spans(text, only_public_ip=True)]
    assert every == ["10.0.0.1", "192.168.1.20", "8.8.8.8", "fe80::1", "2606:4700:4700::1111"]
    assert public == ["8.8.8.8", "2606:4700:4700::1111"]
    assert scrub(text, only_public_ip=True) == (
        "from 10.0.0.1 and 192.168.1.20 to <IP_ADDRESS> and fe80::1 or <IP_ADDRESS>")


TEXT = "Mail ann@example.com, call 415-555-0132, card 4111 1111 1111 1111, from 8.8.8.8."


def test_actions():
    assert scrub(TEXT) == "Mail <EMAIL>, call <PHONE>, card <CREDIT_CARD>, from <IP_ADDRESS>."
    assert scrub(TEXT, action="mask") == "Mail ***@*******.***, call ***-***-****, card **** **** **** ****, from *.*.*.*."
    assert scrub(TEXT, action="dummy") == (
        "Mail email@example.com, call +1 555-555-0100, card 4111111111111111, from 22.214.171.124.")
    assert scrub(TEXT, actions={"email": "keep", "ip_address": "mask"}) == (
        "Mail ann@example.com, call <PHONE>, card <CREDIT_CARD>, from *.*.*.*.")


def test_hash_is_salted_and_deterministic():
    def expected(salt: str, value: str) -> str:
        return hashlib.blake2b(salt.encode() + b"\0" + value.encode(), digest_size=8).hexdigest()

    text = "a ann@example.com b ann@example.com"
    assert scrub(text, action="hash") == f"a <EMAIL:{expected('tokpipe-pii', 'ann@example.com')}> b " \
                                         f"<EMAIL:{expected('tokpipe-pii', 'ann@example.com')}>"
    assert scrub(text, action="hash", salt="s3") == f"a <EMAIL:{expected('s3', 'ann@example.com')}> b " \
                                                    f"<EMAIL:{expected('s3', 'ann@example.com')}>"


def test_salt_from_environment_is_not_a_param(monkeypatch):
    monkeypatch.setenv("PII_TEST_SALT", "from-env")
    stage = Pii(action="hash", salt_env="PII_TEST_SALT")
    digest = hashlib.blake2b(b"from-env\0ann@example.com", digest_size=8).hexdigest()
    assert stage.process(batch("ann@example.com")).kept.column("text")[0].as_py() == f"<EMAIL:{digest}>"
    assert "from-env" not in json.dumps(stage.params())
    monkeypatch.delenv("PII_TEST_SALT")
    with pytest.raises(InvalidArgumentError):
        Pii(salt_env="PII_TEST_SALT")


def test_drop_doc_density_and_metadata():
    dense = "ann@example.com bob@example.com"
    sparse = "Contact ann@example.com. " + "The quiet river ran on through the valley. " * 30
    stage = Pii(actions={"email": "drop_doc"}, max_per_1000_chars=5.0)
    result = stage.process(batch(dense, sparse, "nothing"))
    assert result.kept.column("text").to_pylist()[0].startswith("Contact <EMAIL>. ")
    assert result.rejected.column("reason").to_pylist() == ["pii_density"]
    # Rejected documents are scrubbed too.
    assert result.rejected.column("text").to_pylist() == ["<EMAIL> <EMAIL>"]
    meta = [json.loads(m) for m in result.kept.column("pii").to_pylist()]
    assert meta == [{"counts": {"email": 1}, "spans": [["email", 8, 23]]}, {"counts": {}, "spans": []}]
    assert json.loads(result.rejected.column("pii")[0].as_py()) == {
        "counts": {"email": 2}, "spans": [["email", 0, 15], ["email", 16, 31]]}
    assert stage.stats.as_dict()["dropped_pii_density"] == 1


def test_stats_count_types_and_hold_no_pii():
    stage = Pii()
    stage.process(batch(TEXT, "AKIAIOSFODNN7EXAMPLE and 123-45-6789"))
    stats = stage.stats.as_dict()
    assert {k: stats[k] for k in ("pii_email", "pii_phone", "pii_credit_card", "pii_ip_address", "pii_secret",
                                  "pii_us_ssn", "pii_iban")} == {
        "pii_email": 1, "pii_phone": 1, "pii_credit_card": 1, "pii_ip_address": 1, "pii_secret": 1,
        "pii_us_ssn": 1, "pii_iban": 0}
    dumped = json.dumps(stats)
    for value in ("ann@", "415-555", "4111", "8.8.8.8", "AKIA", "123-45"):
        assert value not in dumped


def test_types_subset_and_large_string():
    text = pa.array([TEXT], type=pa.large_string())
    result = Pii(types=["email"]).process(pa.record_batch([text], names=["text"]))
    assert result.kept.column("text").type == pa.large_string()
    assert result.kept.column("text")[0].as_py() == (
        "Mail <EMAIL>, call 415-555-0132, card 4111 1111 1111 1111, from 8.8.8.8.")


def test_bad_params():
    with pytest.raises(InvalidArgumentError):
        Pii(types=["emails"])
    with pytest.raises(InvalidArgumentError):
        Pii(action="delete")
    with pytest.raises(InvalidArgumentError):
        Pii(types=["email"], actions={"phone": "mask"})
    with pytest.raises(InvalidArgumentError):
        Pii(max_per_1000_chars=-1)


def test_registered():
    assert registered_stages()["pii"] is Pii


# ---------------------------------------------------------------------------------------------
# Beyond the text: fields, ids, rejected documents.

FIRST = ["ann", "bruno", "chiara", "dmitri", "emeka", "fatima", "gustav", "hana", "ines", "jamal"]
LAST = ["lee", "okafor", "rossi", "novak", "tanaka", "silva", "haddad", "berg", "kowalski", "moreau"]
PROSE = ("The ferry left the harbour at dawn and the gulls followed it past the lighthouse, "
         "over water that was still grey from the night's storm. ")


def fake_people(n: int, seed: int) -> list[dict[str, str]]:
    """Made-up people with an address at a reserved domain and a UK drama-range phone number."""
    rng = random.Random(seed)
    people = []
    for i in range(n):
        first, last = rng.choice(FIRST), rng.choice(LAST)
        people.append({"email": f"{first}.{last}{i}@example.org", "phone": f"+44 20 7946 {rng.randrange(10_000):04d}",
                       "alt": f"{first[0]}{last}{i}@mail.example.net"})
    return people


def expected_id(value: str, salt: str = "tokpipe-pii") -> str:
    # The documented replacement, computed here from its definition.
    return "pii-" + hashlib.blake2b(salt.encode() + b"\0" + value.encode(), digest_size=16).hexdigest()


def test_an_email_used_as_the_id_is_replaced_by_a_salted_hash_of_the_whole_id() -> None:
    people = fake_people(3, seed=1)
    ids = [people[0]["email"], "doc-000017", f"mailto:{people[1]['email']}", people[2]["phone"]]
    batch = pa.record_batch([pa.array(ids), pa.array(["nothing to see"] * 4)], names=["id", "text"])
    kept = Pii().process(batch).kept.column("id").to_pylist()
    assert kept == [expected_id(ids[0]), "doc-000017", expected_id(ids[2]), expected_id(ids[3])]
    assert kept == [hashed_id(ids[0]), "doc-000017", hashed_id(ids[2]), hashed_id(ids[3])]
    assert len(set(kept)) == 4  # a tag would have made the three one
    assert Pii(salt="s3").process(batch).kept.column("id")[0].as_py() == expected_id(ids[0], "s3")
    assert Pii(id_action="hash_all").process(batch).kept.column("id").to_pylist() == [expected_id(i) for i in ids]
    assert Pii(id_action="keep").process(batch).kept.column("id").to_pylist() == ids
    spaced = [" doc 18\t", "é-19 ", ""]
    padded = pa.record_batch([pa.array(spaced, pa.large_string()), pa.array(["x"] * 3)], names=["id", "text"])
    assert Pii(id_action="hash_all").process(padded).kept.column("id").to_pylist() == [expected_id(i) for i in spaced]
    # Only types that are acted on: an e-mail address kept in the text is kept in the id.
    assert Pii(actions={"email": "keep"}).process(batch).kept.column("id")[0].as_py() == ids[0]
    # Scrubbing a scrubbed batch again changes no id.
    again = Pii(id_action="hash_all").process(Pii().process(batch).kept.drop_columns(["pii"]))
    assert again.kept.column("id").to_pylist()[0] == expected_id(ids[0])


def test_extra_string_fields_are_scrubbed_and_counted_in_the_metadata() -> None:
    people = fake_people(2, seed=2)
    batch = pa.record_batch({
        "id": pa.array(["a", "b"]),
        "text": pa.array([f"Call {people[0]['phone']} today.", "Nothing here."]),
        "author_email": pa.array([people[0]["email"], None]),
        "signature": pa.array(["-- The editors", f"-- Reply to <{people[1]['email']}>"]),
        "year": pa.array([2021, 2022]),
    })
    stage = Pii()
    kept = stage.process(batch).kept
    assert kept.column("author_email").to_pylist() == ["<EMAIL>", None]
    assert kept.column("signature").to_pylist() == ["-- The editors", "-- Reply to <<EMAIL>>"]
    assert kept.column("year").to_pylist() == [2021, 2022]
    assert kept.schema.field("author_email").type == pa.string()
    meta = [json.loads(m) for m in kept.column("pii").to_pylist()]
    # The text's counts and spans as before; the other fields' counts under "fields".
    assert meta[0] == {"counts": {"phone": 1}, "spans": [["phone", 5, 21]], "fields": {"author_email": {"email": 1}}}
    assert meta[1] == {"counts": {}, "spans": [], "fields": {"signature": {"email": 1}}}
    stats = stage.stats.as_dict()
    assert (stats["pii_phone"], stats["pii_email"], stats["pii_in_fields"]) == (1, 0, 2)
    dumped = json.dumps(stats) + json.dumps(meta)
    assert not any(value in dumped for person in people for value in person.values())


def test_nested_strings_are_scrubbed_meta_phone_lists_and_maps() -> None:
    people = fake_people(4, seed=3)
    meta_type = pa.struct([("phone", pa.string()), ("source", pa.string()), ("pages", pa.int32())])
    authors_type = pa.list_(pa.struct([("name", pa.string()), ("email", pa.string())]))
    batch = pa.record_batch({
        "id": pa.array(["a", "b", "c"]),
        "text": pa.array(["one", "two", "three"]),
        "meta": pa.array([{"phone": people[0]["phone"], "source": "crawl", "pages": 3}, None,
                          {"phone": None, "source": f"sent by {people[1]['email']}", "pages": 1}], type=meta_type),
        "authors": pa.array([[{"name": "A. Lee", "email": people[2]["email"]}], [], None], type=authors_type),
        "headers": pa.array([[("reply-to", people[3]["email"])], None, []], type=pa.map_(pa.string(), pa.string())),
    })
    # A slice, so that the nested arrays' offsets are not zero.
    whole = pa.concat_batches([batch.slice(2, 1), batch]).slice(1)
    kept = Pii().process(whole).kept
    assert kept.column("meta").to_pylist() == [{"phone": "<PHONE>", "source": "crawl", "pages": 3}, None,
                                               {"phone": None, "source": "sent by <EMAIL>", "pages": 1}]
    assert kept.column("authors").to_pylist() == [[{"name": "A. Lee", "email": "<EMAIL>"}], [], None]
    assert kept.column("headers").to_pylist() == [[("reply-to", "<EMAIL>")], None, []]
    assert kept.schema.equals(whole.schema.append(pa.field("pii", pa.string())))
    fields = [json.loads(m).get("fields") for m in kept.column("pii").to_pylist()]
    assert fields == [{"meta.phone": {"phone": 1}, "authors.email": {"email": 1}, "headers.value": {"email": 1}},
                      None, {"meta.source": {"email": 1}}]


def test_json_text_fields_are_scrubbed_and_stay_json() -> None:
    # A field kept as JSON text (Arrow's JSON extension type) is scrubbed as text; a row the
    # text scrub would leave unparseable (a secret's value running into an escaped quote) is
    # redone from its parsed value.
    people = fake_people(2, seed=6)
    values = [{"contact": people[0]["email"], "n": 1}, None, [people[1]["phone"], {"k": 2.5}],
              {"note": 'token: Ab1\\"x', "who": people[1]["email"]}]
    texts = [None if v is None else json.dumps(v) for v in values]
    meta = pa.ExtensionArray.from_storage(pa.json_(pa.string()), pa.array(texts))
    batch = pa.record_batch([pa.array(["a", "b", "c", "d"]), pa.array(["one", "two", "three", "four"]), meta],
                            names=["id", "text", "meta"])
    kept = Pii().process(batch).kept.column("meta")
    assert kept.type == pa.json_(pa.string())
    parsed = [None if t is None else json.loads(t) for t in kept.storage.to_pylist()]
    assert parsed[:3] == [{"contact": "<EMAIL>", "n": 1}, None, ["<PHONE>", {"k": 2.5}]]
    assert parsed[3]["who"] == "<EMAIL>"
    # `fields` cannot pick inside JSON text: naming a path into it scrubs all of it.
    narrow = Pii(fields=["meta.nothing"]).process(batch).kept.column("meta").storage.to_pylist()
    assert json.loads(narrow[0]) == {"contact": "<EMAIL>", "n": 1}


def test_json_text_too_deep_for_json_loads_is_scrubbed() -> None:
    # A field's value nested thousands deep is kept as JSON text (tokpipe.pipeline.fields);
    # checking the scrubbed text with json.loads raised RecursionError and ended the run.
    email = fake_people(1, seed=7)[0]["email"]
    deep = "[" * 3000 + json.dumps(email) + "]" * 3000
    meta = pa.ExtensionArray.from_storage(pa.json_(pa.string()), pa.array([deep]))
    batch = pa.record_batch([pa.array(["a"]), pa.array(["text"]), meta], names=["id", "text", "meta"])
    kept = Pii().process(batch).kept.column("meta").storage.to_pylist()
    assert kept == ["[" * 3000 + '"<EMAIL>"' + "]" * 3000]


def test_fields_names_the_fields_and_the_text_is_always_scrubbed() -> None:
    people = fake_people(2, seed=4)
    batch = pa.record_batch({
        "id": pa.array(["a"]),
        "text": pa.array([f"Mail {people[0]['email']}"]),
        "author_email": pa.array([people[1]["email"]]),
        "meta": pa.array([{"phone": people[0]["phone"], "note": people[1]["alt"]}]),
    })
    kept = Pii(fields=["meta.phone"]).process(batch).kept.to_pylist()[0]
    assert kept["text"] == "Mail <EMAIL>"
    assert kept["meta"] == {"phone": "<PHONE>", "note": people[1]["alt"]}
    assert kept["author_email"] == people[1]["email"]
    assert Pii(fields=["meta"]).process(batch).kept.to_pylist()[0]["meta"] == {"phone": "<PHONE>", "note": "<EMAIL>"}
    assert Pii(fields=[]).process(batch).kept.to_pylist()[0]["meta"] == batch.to_pylist()[0]["meta"]
    for bad in ("author_email", ["id"], ["duplicate_of"], [""]):
        with pytest.raises(InvalidArgumentError):
            Pii(fields=bad)
    with pytest.raises(InvalidArgumentError):
        Pii(id_action="tag")


def corpus_of(root: Path, people: list[dict[str, str]]) -> Path:
    """Three JSONL files (three tasks) of documents whose ids are e-mail addresses, with PII
    in the text, in a top-level field and in ``meta.phone``; a short one for length_filter
    to drop, and an exact copy of the first (under another id, later in the same file) for
    exact_dedup to drop."""
    root.mkdir()
    docs: list[dict[str, Any]] = []
    for i, person in enumerate(people):
        text = PROSE * 2 + f"Bookings: {person['phone']} or {person['alt']} (ref {i})."
        docs.append({"id": person["email"], "text": text, "author_email": person["alt"],
                     "meta": {"phone": person["phone"]}})
    docs.append({"id": people[0]["alt"], "text": f"Write to {people[1]['email']}", "author_email": people[2]["email"],
                 "meta": {"phone": people[2]["phone"]}})
    docs.append({"id": people[3]["alt"], "text": docs[0]["text"], "author_email": people[5]["email"],
                 "meta": {"phone": people[5]["phone"]}})
    for part in range(3):
        lines = [json.dumps(d) + "\n" for d in docs[part::3]]
        (root / f"part{part}.jsonl").write_text("".join(lines), encoding="utf-8")
    return root


def every_string(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in every_string(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in every_string(v)]
    return []


def outputs(out: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    def rows(pattern: str) -> list[dict[str, Any]]:
        found = [r for f in sorted(out.glob(pattern)) for r in pq.read_table(f).to_pylist()]
        return sorted(found, key=lambda r: r["id"])
    return rows("data/part-*.parquet"), rows("rejected/part-*.parquet")


PIPELINE = {"stages": [{"type": "length_filter", "min": 60}, {"type": "exact_dedup"}, {"type": "pii"}]}


def test_documents_rejected_before_the_pii_stage_are_scrubbed_and_duplicate_of_follows_the_ids(tmp_path: Path) -> None:
    people = fake_people(8, seed=5)
    corpus = corpus_of(tmp_path / "in", people)
    kept, rejected = outputs(pipeline.run([corpus], tmp_path / "out", config=PIPELINE, workers=1).out_dir)
    raw = {v for person in people for v in person.values()}
    for row in kept + rejected:
        leaked = [s for s in every_string(row) for value in raw if value in s]
        assert not leaked, (row["id"], row.get("stage"))
    assert len(kept) == 8 and {r["id"] for r in kept} == {expected_id(p["email"]) for p in people}
    assert all(r["meta"]["phone"] == "<PHONE>" and r["author_email"] == "<EMAIL>" for r in kept)
    by_reason = {r["reason"]: r for r in rejected}
    assert set(by_reason) == {"too_short", "duplicate"}
    assert by_reason["too_short"]["id"] == expected_id(people[0]["alt"])
    assert by_reason["too_short"]["text"] == "Write to <EMAIL>"
    assert by_reason["too_short"]["stage"] == "length_filter"
    # The copy names the kept document by the id it has in the output.
    assert by_reason["duplicate"]["id"] == expected_id(people[3]["alt"])
    assert by_reason["duplicate"]["duplicate_of"] == expected_id(people[0]["email"])
    assert by_reason["duplicate"]["duplicate_of"] in {r["id"] for r in kept}


def test_pii_before_dedup_gives_the_same_ids_and_the_same_output_for_any_worker_count(tmp_path: Path) -> None:
    people = fake_people(8, seed=5)
    corpus = corpus_of(tmp_path / "in", people)
    first = {"stages": [{"type": "pii"}, {"type": "length_filter", "min": 60}, {"type": "exact_dedup"}]}
    # Two runs, in one process and in three worker processes (one task each).
    runs = [outputs(pipeline.run([corpus], tmp_path / f"out{w}", config=first, workers=w).out_dir) for w in (1, 3)]
    assert runs[0] == runs[1]
    kept, rejected = runs[0]
    duplicate = next(r for r in rejected if r["reason"] == "duplicate")
    assert duplicate["duplicate_of"] == expected_id(people[0]["email"])
    # Scrubbing first or last gives the same kept documents and ids.
    last, _ = outputs(pipeline.run([corpus], tmp_path / "last", config=PIPELINE, workers=1).out_dir)
    assert [(r["id"], r["text"]) for r in kept] == [(r["id"], r["text"]) for r in last]


def test_scrub_rejected_false_after_a_dropping_stage_warns_at_config_time() -> None:
    config = {"stages": [{"type": "normalize"}, {"type": "length_filter"}, {"type": "exact_dedup"},
                         {"type": "pii", "scrub_rejected": False}]}
    with pytest.warns(ConfigWarning, match=r"stages\[4\] \(pii\): scrub_rejected is false, so what "
                                           r"length_filter, exact_dedup drop\(s\) goes to rejected/"):
        parse_config(config)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # none of these warns
        parse_config({"stages": [{"type": "normalize"}, {"type": "pii", "scrub_rejected": False}]})
        parse_config({"stages": [{"type": "length_filter"}, {"type": "pii"}]})
        parse_config({"stages": [{"type": "pii", "scrub_rejected": False}, {"type": "length_filter"}]})
    # A pii stage that drops documents counts as a dropping stage for a later one.
    with pytest.warns(ConfigWarning, match=r"stages\[2\] \(pii\)"):
        parse_config({"stages": [{"type": "pii", "action": "drop_doc"}, {"type": "pii", "scrub_rejected": False}]})
    with pytest.raises(ConfigError, match="scrub_rejected"):
        parse_config({"stages": [{"type": "pii", "scrub_rejected": "no"}]})


def test_scrub_rejected_false_leaves_earlier_rejections_as_they_were(tmp_path: Path) -> None:
    people = fake_people(8, seed=5)
    corpus = corpus_of(tmp_path / "in", people)
    config = {"stages": [*PIPELINE["stages"][:2], {"type": "pii", "scrub_rejected": False}]}
    with pytest.warns(ConfigWarning):
        parsed = parse_config(config)
    _, rejected = outputs(pipeline.run([corpus], tmp_path / "out", config=parsed, workers=1).out_dir)
    assert {r["id"] for r in rejected} == {people[0]["alt"], people[3]["alt"]}
