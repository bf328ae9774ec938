//! PII detection and scrubbing over an Arrow string column: e-mail addresses, IP addresses,
//! phone numbers, payment cards, China resident IDs, US SSNs, IBANs, secrets (API keys,
//! tokens, private keys, JWTs, `password = ...` values), URL credentials and MAC addresses.
//!
//! [`detect`] finds candidates from cheap triggers and keeps those that pass a validator
//! (checksums in [`validate`], context rules in [`detect`]); [`resolve`] makes the spans
//! disjoint (the longest wins; equal lengths go to the type listed first in [`PiiType`], then
//! to the earlier start); [`scrub`] replaces each span by its type's [`Action`]. Spans are
//! reported in Unicode code points of the original text, the unit Python's `str` slices in,
//! so `text[start:end]` is the match. No detected text is ever put in an error or a count.
//!
//! (Over 500 lines: 140 of them are the tests of the whole detector, from triggers to scrubbed
//! text; the rest is the types, overlap resolution, scrubbing and the column driver.)

pub mod detect;
pub mod validate;

use crate::text::StrColumn;
use blake2::digest::{Update, VariableOutput};
use blake2::Blake2bVar;
use detect::{DetectOptions, RawSpan};
use rayon::prelude::*;
use std::fmt::Write;

// Text per parallel run: runs are cut by size so a run of long documents does not hold up the
// other threads (see `StrColumn::runs`).
const RUN_BYTES: usize = 128 << 10;

/// The kinds of PII, in tie-breaking order (the first wins a tie of equal-length spans).
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PiiType {
    Secret = 0,
    UrlCredentials = 1,
    Email = 2,
    Iban = 3,
    ChinaId = 4,
    CreditCard = 5,
    UsSsn = 6,
    Phone = 7,
    IpAddress = 8,
    MacAddress = 9,
}

impl PiiType {
    pub const COUNT: usize = 10;
    pub const ALL: [PiiType; PiiType::COUNT] = [
        PiiType::Secret,
        PiiType::UrlCredentials,
        PiiType::Email,
        PiiType::Iban,
        PiiType::ChinaId,
        PiiType::CreditCard,
        PiiType::UsSsn,
        PiiType::Phone,
        PiiType::IpAddress,
        PiiType::MacAddress,
    ];

    /// The name used in configs, metadata and stats.
    pub fn name(self) -> &'static str {
        match self {
            PiiType::Secret => "secret",
            PiiType::UrlCredentials => "url_credentials",
            PiiType::Email => "email",
            PiiType::Iban => "iban",
            PiiType::ChinaId => "china_id",
            PiiType::CreditCard => "credit_card",
            PiiType::UsSsn => "us_ssn",
            PiiType::Phone => "phone",
            PiiType::IpAddress => "ip_address",
            PiiType::MacAddress => "mac_address",
        }
    }

    pub fn from_name(name: &str) -> Option<PiiType> {
        PiiType::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The `tag` action's replacement.
    pub fn tag(self) -> &'static str {
        match self {
            PiiType::Secret => "<SECRET>",
            PiiType::UrlCredentials => "<URL_CREDENTIALS>",
            PiiType::Email => "<EMAIL>",
            PiiType::Iban => "<IBAN>",
            PiiType::ChinaId => "<CHINA_ID>",
            PiiType::CreditCard => "<CREDIT_CARD>",
            PiiType::UsSsn => "<US_SSN>",
            PiiType::Phone => "<PHONE>",
            PiiType::IpAddress => "<IP_ADDRESS>",
            PiiType::MacAddress => "<MAC_ADDRESS>",
        }
    }

    /// The `dummy` action's fixed value: datatrove's `PIIFormatter` first replacements for
    /// e-mail (`email@example.com`) and IPv4 (`22.214.171.124`); documentation or published
    /// test values elsewhere.
    pub fn dummy(self, matched: &str) -> &'static str {
        match self {
            PiiType::Secret => "REDACTED",
            PiiType::UrlCredentials => "user:password",
            PiiType::Email => "email@example.com",
            PiiType::Iban => "GB82WEST12345698765432",
            PiiType::ChinaId => "11010519491231002X",
            PiiType::CreditCard => "4111111111111111",
            PiiType::UsSsn => "123-45-6789",
            PiiType::Phone => "+1 555-555-0100",
            PiiType::IpAddress if matched.contains(':') => "2001:db8::1",
            PiiType::IpAddress => "22.214.171.124",
            PiiType::MacAddress => "00:00:5e:00:53:00",
        }
    }
}

/// What replaces a span.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// `<EMAIL>`, `<PHONE>`, ...
    Tag = 0,
    /// ASCII letters and digits become `*`, everything else (separators, `@`, `.`) stays.
    Mask = 1,
    /// `<EMAIL:h>` with `h` the first 16 hex digits of BLAKE2b-64 of salt, 0x00, the match.
    Hash = 2,
    /// A fixed value per type ([`PiiType::dummy`]).
    Dummy = 3,
    /// Counted towards the document's PII density (dropped above the threshold); replaced as
    /// `tag` in the documents that are kept.
    DropDoc = 4,
    /// Reported in the metadata only; the text is left as it is.
    Keep = 5,
}

impl Action {
    pub fn from_name(name: &str) -> Option<Action> {
        Some(match name {
            "tag" => Action::Tag,
            "mask" => Action::Mask,
            "hash" => Action::Hash,
            "dummy" => Action::Dummy,
            "drop_doc" => Action::DropDoc,
            "keep" => Action::Keep,
            _ => return None,
        })
    }
}

/// The stage's parameters.
#[derive(Clone, Debug)]
pub struct PiiParams {
    pub detect: DetectOptions,
    pub actions: [Action; PiiType::COUNT],
    pub salt: Vec<u8>,
    /// Spans of `drop_doc` types per 1,000 characters above which a document is dropped.
    pub max_per_1000_chars: f64,
}

impl Default for PiiParams {
    fn default() -> Self {
        PiiParams {
            detect: DetectOptions::default(),
            actions: [Action::Tag; PiiType::COUNT],
            salt: b"tokpipe-pii".to_vec(),
            max_per_1000_chars: 0.0,
        }
    }
}

/// A resolved span in code points of the original text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub kind: PiiType,
    pub start: usize,
    pub end: usize,
}

/// Disjoint spans from overlapping detections, sorted by start: longest first, then by
/// [`PiiType`] order, then earliest; a span overlapping one already kept is dropped.
pub fn resolve(mut spans: Vec<RawSpan>) -> Vec<RawSpan> {
    if spans.len() <= 1 {
        return spans;
    }
    spans.sort_by_key(|s| (std::cmp::Reverse(s.end - s.start), s.kind, s.start));
    let mut kept: Vec<RawSpan> = Vec::with_capacity(spans.len());
    for s in spans {
        // `kept` is sorted by start: the neighbours are the only possible overlaps.
        let at = kept.partition_point(|k| k.start < s.start);
        let clash_prev = at > 0 && kept[at - 1].end > s.start;
        let clash_next = at < kept.len() && kept[at].start < s.end;
        if !clash_prev && !clash_next {
            kept.insert(at, s);
        }
    }
    kept
}

/// Byte spans of `text` after detection and overlap resolution.
pub fn find(text: &str, opts: &DetectOptions) -> Vec<RawSpan> {
    let mut raw = Vec::new();
    detect::detect(text, opts, &mut raw);
    resolve(raw)
}

fn hash_hex(salt: &[u8], matched: &str, out: &mut String) {
    let mut hasher = Blake2bVar::new(8).expect("8 is a valid BLAKE2b output size");
    hasher.update(salt);
    hasher.update(&[0]);
    hasher.update(matched.as_bytes());
    let mut digest = [0u8; 8];
    hasher
        .finalize_variable(&mut digest)
        .expect("the digest has the hasher's output size");
    for b in digest {
        let _ = write!(out, "{b:02x}");
    }
}

/// One document's outcome.
pub struct Scrubbed {
    /// Spans in code points of the original text.
    pub spans: Vec<Span>,
    /// Whether the density of `drop_doc` spans is above the threshold.
    pub drop: bool,
}

/// Scrubs one document into `out` (cleared first).
pub fn scrub(text: &str, p: &PiiParams, out: &mut String) -> Scrubbed {
    out.clear();
    let raw = find(text, &p.detect);
    let mut spans = Vec::with_capacity(raw.len());
    let (mut byte_at, mut char_at) = (0usize, 0usize);
    let mut drop_spans = 0usize;
    for s in &raw {
        let gap = &text[byte_at..s.start];
        char_at += gap.chars().count();
        let start = char_at;
        let matched = &text[s.start..s.end];
        char_at += matched.chars().count();
        byte_at = s.end;
        spans.push(Span {
            kind: s.kind,
            start,
            end: char_at,
        });
        out.push_str(gap);
        match p.actions[s.kind as usize] {
            Action::Tag => out.push_str(s.kind.tag()),
            Action::DropDoc => {
                drop_spans += 1;
                out.push_str(s.kind.tag());
            }
            Action::Keep => out.push_str(matched),
            Action::Mask => {
                out.extend(
                    matched
                        .chars()
                        .map(|c| if c.is_ascii_alphanumeric() { '*' } else { c }),
                )
            }
            Action::Dummy => out.push_str(s.kind.dummy(matched)),
            Action::Hash => {
                let tag = s.kind.tag();
                out.push_str(&tag[..tag.len() - 1]);
                out.push(':');
                hash_hex(&p.salt, matched, out);
                out.push('>');
            }
        }
    }
    out.push_str(&text[byte_at..]);
    let drop = drop_spans > 0 && {
        let chars = char_at + text[byte_at..].chars().count();
        drop_spans as f64 * 1000.0 / chars.max(1) as f64 > p.max_per_1000_chars
    };
    Scrubbed { spans, drop }
}

/// The metadata of one document as JSON: `{"counts": {type: n, ...}, "spans": [[type, start,
/// end], ...]}`, counts only for the types found, spans in code points.
pub fn metadata_json(spans: &[Span], out: &mut String) {
    let mut counts = [0usize; PiiType::COUNT];
    for s in spans {
        counts[s.kind as usize] += 1;
    }
    out.push_str("{\"counts\":{");
    let mut first = true;
    for t in PiiType::ALL {
        if counts[t as usize] > 0 {
            if !first {
                out.push(',');
            }
            first = false;
            let _ = write!(out, "\"{}\":{}", t.name(), counts[t as usize]);
        }
    }
    out.push_str("},\"spans\":[");
    for (i, s) in spans.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "[\"{}\",{},{}]", s.kind.name(), s.start, s.end);
    }
    out.push_str("]}");
}

/// The column's result: the scrubbed text and the metadata as Arrow offsets (64-bit) and
/// data, counts per type field-major (`COUNT` arrays of one count per row, in [`PiiType`]
/// order), and one byte per row, 1 when the document is above the density threshold.
pub struct PiiOutput {
    pub offsets: Vec<i64>,
    pub data: Vec<u8>,
    pub meta_offsets: Vec<i64>,
    pub meta_data: Vec<u8>,
    pub counts: Vec<u64>,
    pub drops: Vec<u8>,
}

struct Part {
    lens: Vec<usize>,
    data: String,
    meta_lens: Vec<usize>,
    meta: String,
    counts: Vec<[u64; PiiType::COUNT]>,
    drops: Vec<u8>,
}

pub fn pii_column(column: &StrColumn, p: &PiiParams) -> PiiOutput {
    let n = column.len();
    let parts: Vec<Part> = column
        .runs(RUN_BYTES)
        .into_par_iter()
        .map(|rows| {
            let (start, end) = (rows.start, rows.end);
            let mut part = Part {
                lens: Vec::with_capacity(end - start),
                data: String::new(),
                meta_lens: Vec::with_capacity(end - start),
                meta: String::new(),
                counts: Vec::with_capacity(end - start),
                drops: Vec::with_capacity(end - start),
            };
            let mut out = String::new();
            for i in start..end {
                let r = scrub(column.get(i), p, &mut out);
                part.data.push_str(&out);
                part.lens.push(out.len());
                let before = part.meta.len();
                metadata_json(&r.spans, &mut part.meta);
                part.meta_lens.push(part.meta.len() - before);
                let mut c = [0u64; PiiType::COUNT];
                for s in &r.spans {
                    c[s.kind as usize] += 1;
                }
                part.counts.push(c);
                part.drops.push(r.drop as u8);
            }
            part
        })
        .collect();
    let mut o = PiiOutput {
        offsets: Vec::with_capacity(n + 1),
        data: Vec::with_capacity(parts.iter().map(|p| p.data.len()).sum()),
        meta_offsets: Vec::with_capacity(n + 1),
        meta_data: Vec::with_capacity(parts.iter().map(|p| p.meta.len()).sum()),
        counts: Vec::new(),
        drops: Vec::with_capacity(n),
    };
    o.offsets.push(0);
    o.meta_offsets.push(0);
    let (mut at, mut meta_at) = (0i64, 0i64);
    let mut rows: Vec<[u64; PiiType::COUNT]> = Vec::with_capacity(n);
    for part in parts {
        for len in part.lens {
            at += len as i64;
            o.offsets.push(at);
        }
        for len in part.meta_lens {
            meta_at += len as i64;
            o.meta_offsets.push(meta_at);
        }
        o.data.extend_from_slice(part.data.as_bytes());
        o.meta_data.extend_from_slice(part.meta.as_bytes());
        o.drops.extend_from_slice(&part.drops);
        rows.extend(part.counts);
    }
    o.counts = crate::text::field_major(&rows);
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(text: &str) -> Vec<(&'static str, &str)> {
        find(text, &DetectOptions::default())
            .into_iter()
            .map(|s| (s.kind.name(), &text[s.start..s.end]))
            .collect()
    }

    #[test]
    fn finds_each_type() {
        assert_eq!(
            found("mail jane.doe@example.org now"),
            [("email", "jane.doe@example.org")]
        );
        assert_eq!(
            found("host 203.0.114.7 is up"),
            [("ip_address", "203.0.114.7")]
        );
        assert_eq!(found("call (415) 555-0132."), [("phone", "(415) 555-0132")]);
        assert_eq!(
            found("call +44 20 7946 0958."),
            [("phone", "+44 20 7946 0958")]
        );
        assert_eq!(found("手机 13812345678 联系"), [("phone", "13812345678")]);
        assert_eq!(
            found("card 4111 1111 1111 1111 ok"),
            [("credit_card", "4111 1111 1111 1111")]
        );
        assert_eq!(
            found("id 11010519491231002X."),
            [("china_id", "11010519491231002X")]
        );
        assert_eq!(found("ssn 123-45-6789."), [("us_ssn", "123-45-6789")]);
        assert_eq!(
            found("iban GB82 WEST 1234 5698 7654 32."),
            [("iban", "GB82 WEST 1234 5698 7654 32")]
        );
        assert_eq!(
            found("key AKIAIOSFODNN7EXAMPLE."),
            [("secret", "AKIAIOSFODNN7EXAMPLE")]
        );
        assert_eq!(
            found("api_key = \"sk_live_4eC39HqLyjWDarjtT1\""),
            [("secret", "sk_live_4eC39HqLyjWDarjtT1")]
        );
        assert_eq!(
            found("https://bob:hunter22@db.example.com/x"),
            [("url_credentials", "bob:hunter22")]
        );
        assert_eq!(
            found("mac 00:1a:2b:3c:4d:5e."),
            [("mac_address", "00:1a:2b:3c:4d:5e")]
        );
        assert_eq!(
            found("v6 2606:4700:4700::1111."),
            [("ip_address", "2606:4700:4700::1111")]
        );
    }

    #[test]
    fn does_not_fire() {
        for text in [
            "Bumped to version 1.2.3.4 today.",
            "## 1.2.3.4 (2021-03-04)",
            "Released 2020-01-01 and 03/04/2021.",
            "ISBN 978-3-16-148410-0 and doi:10.1000/182",
            "id 550e8400-e29b-41d4-a716-446655440000 sha d41d8cd98f00b204e9800998ecf8427e",
            "alice@devbox:~$ ls",
            "git clone git@github.com:org/repo.git",
            "1234 5678 9012 3456 7890",
            "std::vector<int> a; 12:30:45",
        ] {
            assert_eq!(found(text), [], "{text}");
        }
    }

    #[test]
    fn overlaps_longest_wins() {
        let spans = resolve(vec![
            RawSpan {
                kind: PiiType::IpAddress,
                start: 7,
                end: 14,
            },
            RawSpan {
                kind: PiiType::IpAddress,
                start: 0,
                end: 14,
            },
            RawSpan {
                kind: PiiType::Phone,
                start: 20,
                end: 30,
            },
            RawSpan {
                kind: PiiType::CreditCard,
                start: 20,
                end: 30,
            },
        ]);
        assert_eq!(
            spans,
            [
                RawSpan {
                    kind: PiiType::IpAddress,
                    start: 0,
                    end: 14
                },
                RawSpan {
                    kind: PiiType::CreditCard,
                    start: 20,
                    end: 30
                },
            ]
        );
    }

    #[test]
    fn code_point_offsets_and_actions() {
        let mut p = PiiParams::default();
        let mut out = String::new();
        let text = "café: a@b.co";
        let r = scrub(text, &p, &mut out);
        assert_eq!(out, "café: <EMAIL>");
        assert_eq!(
            r.spans,
            [Span {
                kind: PiiType::Email,
                start: 6,
                end: 12
            }]
        );
        p.actions[PiiType::Email as usize] = Action::Mask;
        scrub(text, &p, &mut out);
        assert_eq!(out, "café: *@*.**");
    }
}
