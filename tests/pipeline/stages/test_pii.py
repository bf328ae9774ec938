"""pii: detection against a labelled set of real paragraphs with inserted values (true spans
known by construction), the cases it must not fire on, the actions, the metadata and stats."""

from __future__ import annotations

import hashlib
import json
import re

import pyarrow as pa
import pytest

from tests.conftest import load_documents
from tests.pipeline.stages import pii_labels as labels
from tokpipe.errors import InvalidArgumentError
from tokpipe.pipeline.base import registered_stages
from tokpipe.pipeline.stages.pii import PII_TYPES, Pii, pii_spans


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
