//! JSON Lines records: the one-pass field extraction that both JSON-lines readers share, and
//! the block parser behind the data pipeline's reader.
//!
//! - [`parse_record`] pulls the wanted fields out of one JSON object (the text field, an id
//!   field, and optionally the other fields as the text of a JSON object) without building
//!   the record: other values are skipped, or borrowed as raw JSON text. The training corpus
//!   reader ([`crate::corpus`]) takes only the text field through it.
//! - [`parse_block`] is the fast path of `python/tokpipe/pipeline/readers/jsonl.py`: it runs
//!   over a block of whole lines and appends the documents to Arrow string buffers (ids and
//!   texts), with no Python object per line.
//!
//! The Python reader's rules are the standard library's `json` module's, and they stay the
//! reference: [`parse_block`] takes a line only when it is sure `json.loads` would read it to
//! the same id, text and other fields. Any other line (not UTF-8, not JSON or not an object,
//! no string text, an id that is a float or a container, a text or line over the size limit)
//! stops the block right before it, so the caller reads that one line the slow way (and
//! reports it if it is bad), then calls again after it. Lines serde_json rejects but Python
//! accepts (`NaN`, nesting deeper than serde's limit, numbers out of f64 range) take the slow
//! path too, so they are read exactly as before; the reverse cannot happen, as serde_json
//! accepts no JSON that `json.loads` rejects.
//!
//! (Over 500 lines: 119 of them are its unit tests; the rest is one field extraction, a serde
//! visitor that skips or borrows what it does not want, and the block parser built on it, which
//! must take a line exactly when that extraction and `json.loads` agree.)

use serde::de::{DeserializeSeed, Deserializer as _, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use std::borrow::Cow;

/// Which fields [`parse_record`] looks for.
#[derive(Clone, Copy, Debug)]
pub struct RecordSpec<'f> {
    pub text_field: &'f str,
    /// The id field, if the caller wants one. When it names the text field too, the text
    /// wins and the record has no id (as when the reader pops the text first).
    pub id_field: Option<&'f str>,
    /// Collect the fields other than the text and id as a JSON object (their raw values,
    /// in record order, repeated keys included, so `json.loads` of it gives what the record
    /// minus those two fields would).
    pub keep_rest: bool,
}

/// The JSON value of the text field.
#[derive(Debug, PartialEq, Eq)]
pub enum FieldValue<'a> {
    Text(Cow<'a, str>),
    /// The JSON type the field had instead of a string ("null", "a number", ...).
    Other(&'static str),
}

/// The JSON value of the id field, as far as the pipeline turns ids into strings.
#[derive(Debug, PartialEq, Eq)]
pub enum IdValue<'a> {
    Str(Cow<'a, str>),
    Null,
    /// An integer or a boolean, printed as Python prints it (`str(7)`, `json.dumps(True)`).
    Printed(String),
    /// A float, an array or an object: Python's printing of these is not reproduced here.
    Unsupported,
}

/// What [`parse_record`] found in one record.
#[derive(Debug, Default)]
pub struct RecordFields<'a> {
    pub text: Option<FieldValue<'a>>,
    pub id: Option<IdValue<'a>>,
    /// `{...}` of the other fields, `None` when there are none (or they were not asked for).
    pub rest: Option<String>,
}

/// The wanted fields of the JSON object `line` (whitespace around it allowed, nothing else).
/// A repeated key keeps its last value, as `json.loads` and most JSON readers do.
pub fn parse_record<'de>(
    line: &'de str,
    spec: &RecordSpec<'_>,
) -> serde_json::Result<RecordFields<'de>> {
    let mut de = serde_json::Deserializer::from_str(line);
    let fields = de.deserialize_map(RecordVisitor { spec })?;
    de.end()?;
    Ok(fields)
}

struct RecordVisitor<'s, 'f> {
    spec: &'s RecordSpec<'f>,
}

impl<'de> Visitor<'de> for RecordVisitor<'_, '_> {
    type Value = RecordFields<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<M: MapAccess<'de>>(
        self,
        mut map: M,
    ) -> std::result::Result<Self::Value, M::Error> {
        let spec = self.spec;
        let mut fields = RecordFields::default();
        let mut rest: Vec<u8> = Vec::new();
        while let Some(key) = map.next_key_seed(KeySeed)? {
            if key == spec.text_field {
                fields.text = Some(map.next_value_seed(FieldValueSeed)?);
            } else if spec.id_field == Some(key.as_ref()) {
                fields.id = Some(map.next_value_seed(IdValueSeed)?);
            } else if spec.keep_rest {
                let raw: &'de RawValue = map.next_value()?;
                rest.push(if rest.is_empty() { b'{' } else { b',' });
                serde_json::to_writer(&mut rest, key.as_ref()).map_err(serde::de::Error::custom)?;
                rest.push(b':');
                rest.extend_from_slice(raw.get().as_bytes());
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        if !rest.is_empty() {
            rest.push(b'}');
            // Keys were written by serde_json and values copied from a `str`: valid UTF-8.
            fields.rest = Some(String::from_utf8(rest).map_err(serde::de::Error::custom)?);
        }
        Ok(fields)
    }
}

/// A key, borrowed from the line unless it holds escapes.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Cow<'de, str>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Cow<'de, str>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a key")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v))
    }
}

struct FieldValueSeed;

impl<'de> DeserializeSeed<'de> for FieldValueSeed {
    type Value = FieldValue<'de>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for FieldValueSeed {
    type Value = FieldValue<'de>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(FieldValue::Text(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(FieldValue::Text(Cow::Owned(v.to_string())))
    }
    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(FieldValue::Text(Cow::Owned(v)))
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(FieldValue::Other("null"))
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(FieldValue::Other("a boolean"))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(FieldValue::Other("a number"))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(FieldValue::Other("a number"))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(FieldValue::Other("a number"))
    }
    fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<Self::Value, S::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(FieldValue::Other("an array"))
    }
    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(FieldValue::Other("an object"))
    }
}

struct IdValueSeed;

impl<'de> DeserializeSeed<'de> for IdValueSeed {
    type Value = IdValue<'de>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for IdValueSeed {
    type Value = IdValue<'de>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(IdValue::Str(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(IdValue::Str(Cow::Owned(v.to_string())))
    }
    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(IdValue::Str(Cow::Owned(v)))
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(IdValue::Null)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(IdValue::Printed(v.to_string()))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(IdValue::Printed(v.to_string()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(IdValue::Printed(v.to_string()))
    }
    // serde_json hands `-0` and integers past u64 over as floats: Python prints those as
    // integers, so they go to the slow path with the real floats.
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(IdValue::Unsupported)
    }
    fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<Self::Value, S::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(IdValue::Unsupported)
    }
    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(IdValue::Unsupported)
    }
}

// ---------------------------------------------------------------------------------------------
// Blocks of lines.

/// Strings laid out as an Arrow `large_string` column: `offsets[i]..offsets[i + 1]` of `data`.
#[derive(Debug)]
pub struct StringsBuilder {
    pub offsets: Vec<i64>,
    pub data: Vec<u8>,
}

impl StringsBuilder {
    fn with_capacity(bytes: usize) -> Self {
        StringsBuilder {
            offsets: vec![0],
            data: Vec::with_capacity(bytes),
        }
    }

    fn push(&mut self, s: &str) {
        self.data.extend_from_slice(s.as_bytes());
        self.offsets.push(self.data.len() as i64);
    }

    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// How [`parse_block`] reads lines.
#[derive(Clone, Copy, Debug)]
pub struct BlockSpec<'f> {
    pub text_field: &'f str,
    pub id_field: &'f str,
    /// Keep the other fields of each record (see [`RecordSpec::keep_rest`]).
    pub keep_rest: bool,
    /// A record without an id gets `"{id_prefix}:{line number}"`.
    pub id_prefix: &'f str,
    /// Lines longer than this (without their line ending) are left to the caller.
    pub max_line_bytes: usize,
    /// Texts longer than this (UTF-8 bytes) are left to the caller.
    pub max_text_bytes: usize,
}

/// Why [`parse_block`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockStop {
    /// Every line of the block was read.
    End,
    /// The batch is full: `max_docs` documents or `text_room` bytes of text were reached.
    Full,
    /// The line at `consumed` is left to the caller.
    Slow,
}

/// The documents [`parse_block`] read, and where it stopped.
#[derive(Debug)]
pub struct ParsedBlock {
    pub ids: StringsBuilder,
    pub texts: StringsBuilder,
    /// Per document, the other fields (only with [`BlockSpec::keep_rest`]; else empty).
    pub rest: Vec<Option<String>>,
    /// Bytes of the block read (whole lines, line endings included).
    pub consumed: usize,
    /// Where the line after the one left to the caller starts (with [`BlockStop::Slow`]).
    pub next_line: usize,
    /// Lines read: the next line's number is `first_line + lines`.
    pub lines: u64,
    /// Whether a non-blank line was read.
    pub saw_record: bool,
    pub stop: BlockStop,
}

/// Python's `bytes.strip()` whitespace: what makes a line blank for the reader.
fn is_blank(line: &[u8]) -> bool {
    line.iter()
        .all(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c))
}

/// Reads the documents of `block` (whole lines; its first line is number `first_line` of the
/// file) until the block ends, a line must be left to the caller, or the batch is full:
/// `max_docs` documents, or `text_room` bytes of text reached (the document that reaches it
/// is included, as the Python batch builder closes a batch after the document that fills it).
pub fn parse_block(
    block: &[u8],
    first_line: u64,
    spec: &BlockSpec<'_>,
    max_docs: usize,
    text_room: usize,
) -> ParsedBlock {
    let record_spec = RecordSpec {
        text_field: spec.text_field,
        id_field: Some(spec.id_field),
        keep_rest: spec.keep_rest,
    };
    // One check of the whole block is the fast path; only a block with a bad byte is
    // checked again line by line.
    let all_utf8 = std::str::from_utf8(block).is_ok();
    let mut out = ParsedBlock {
        ids: StringsBuilder::with_capacity(0),
        // The texts are never longer than the block: reserved whole, a text of hundreds of MB
        // is written once, not copied at each doubling of its buffer (pages that are never
        // written cost no memory).
        texts: StringsBuilder::with_capacity(block.len()),
        rest: Vec::new(),
        consumed: 0,
        next_line: 0,
        lines: 0,
        saw_record: false,
        stop: BlockStop::End,
    };
    let mut at = 0;
    while at < block.len() {
        let (content, next) = match memchr::memchr(b'\n', &block[at..]) {
            Some(i) => {
                let line = &block[at..at + i];
                (line.strip_suffix(b"\r").unwrap_or(line), at + i + 1)
            }
            None => (&block[at..], block.len()),
        };
        out.next_line = next;
        if content.len() > spec.max_line_bytes {
            out.stop = BlockStop::Slow;
            return out;
        }
        if is_blank(content) {
            at = next;
            out.consumed = at;
            out.lines += 1;
            continue;
        }
        let line = if all_utf8 {
            // SAFETY: `block` is valid UTF-8 and `content` is cut at ASCII bytes ('\n', '\r'),
            // so it is whole characters.
            unsafe { std::str::from_utf8_unchecked(content) }
        } else {
            match std::str::from_utf8(content) {
                Ok(line) => line,
                Err(_) => {
                    out.stop = BlockStop::Slow;
                    return out;
                }
            }
        };
        let number = first_line + out.lines;
        let Some((id, text, rest)) = take_record(line, &record_spec, spec) else {
            out.stop = BlockStop::Slow;
            return out;
        };
        out.saw_record = true;
        match id {
            Some(id) => out.ids.push(&id),
            None => out.ids.push(&format!("{}:{number}", spec.id_prefix)),
        }
        out.texts.push(&text);
        if spec.keep_rest {
            out.rest.push(rest);
        }
        at = next;
        out.consumed = at;
        out.lines += 1;
        if out.texts.len() >= max_docs || out.texts.data.len() >= text_room {
            out.stop = BlockStop::Full;
            return out;
        }
    }
    out
}

type Taken<'a> = (Option<Cow<'a, str>>, Cow<'a, str>, Option<String>);

/// (id, text, other fields) of a line the fast path can take, or `None` to leave it.
fn take_record<'a>(
    line: &'a str,
    record_spec: &RecordSpec<'_>,
    spec: &BlockSpec<'_>,
) -> Option<Taken<'a>> {
    let fields = parse_record(line, record_spec).ok()?;
    let Some(FieldValue::Text(text)) = fields.text else {
        return None;
    };
    if text.len() > spec.max_text_bytes {
        return None;
    }
    let id = match fields.id {
        None | Some(IdValue::Null) => None,
        Some(IdValue::Str(s)) => Some(s),
        Some(IdValue::Printed(s)) => Some(Cow::Owned(s)),
        Some(IdValue::Unsupported) => return None,
    };
    Some((id, text, fields.rest))
}

/// The `\n` bytes in `bytes`: how the pipeline's line reader numbers the lines of a block it
/// hands on whole (one SIMD scan; numpy's compare-then-count made two passes and a mask).
pub fn count_newlines(bytes: &[u8]) -> usize {
    memchr::memchr_iter(b'\n', bytes).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(keep_rest: bool) -> BlockSpec<'static> {
        BlockSpec {
            text_field: "text",
            id_field: "id",
            keep_rest,
            id_prefix: "f.jsonl",
            max_line_bytes: 1000,
            max_text_bytes: 100,
        }
    }

    fn strings(b: &StringsBuilder) -> Vec<String> {
        b.offsets
            .windows(2)
            .map(|w| String::from_utf8(b.data[w[0] as usize..w[1] as usize].to_vec()).unwrap())
            .collect()
    }

    #[test]
    fn reads_ids_texts_and_rest_in_order() {
        let block = concat!(
            "{\"id\": \"a\", \"text\": \"one\\n\", \"n\": 1}\n",
            "\n",
            "  \t\r\n",
            "{\"text\": \"two\", \"id\": 7, \"meta\": {\"k\": [1, \"x\"]}, \"n\": 2}\r\n",
            "{\"id\": null, \"text\": \"three\"}\n",
            "{\"id\": true, \"text\": \"f\\u00e9\\ud83d\\ude00\", \"te\\u0078t\": \"last wins\"}",
        );
        let out = parse_block(block.as_bytes(), 1, &spec(true), 100, 1 << 20);
        assert_eq!(out.stop, BlockStop::End);
        assert_eq!(out.consumed, block.len());
        assert_eq!(out.lines, 6);
        assert_eq!(strings(&out.ids), ["a", "7", "f.jsonl:5", "true"]);
        assert_eq!(strings(&out.texts), ["one\n", "two", "three", "last wins"]);
        assert_eq!(
            out.rest,
            [
                Some("{\"n\":1}".to_string()),
                Some("{\"meta\":{\"k\": [1, \"x\"]},\"n\":2}".to_string()),
                None,
                None
            ]
        );
    }

    #[test]
    fn leaves_every_doubtful_line_to_the_caller() {
        let doubtful: [&[u8]; 12] = [
            b"{\"text\": \"broken",
            b"[\"an\", \"array\"]",
            b"{\"body\": \"no text\"}",
            b"{\"text\": 42}",
            b"{\"text\": null}",
            b"{\"text\": \"caf\xe9\"}",
            b"{\"text\": \"lone \\ud800 surrogate\"}",
            b"{\"text\": \"a\", \"id\": 1.5}",
            b"{\"text\": \"a\", \"id\": -0}",
            b"{\"text\": \"a\", \"id\": [1]}",
            b"{\"text\": \"a\", \"n\": NaN}",
            b"{\"text\": \"a\"} trailing",
        ];
        for line in doubtful {
            let mut block = b"{\"text\": \"good\"}\n".to_vec();
            block.extend_from_slice(line);
            block.extend_from_slice(b"\n{\"text\": \"after\"}\n");
            let out = parse_block(&block, 10, &spec(false), 100, 1 << 20);
            assert_eq!(
                out.stop,
                BlockStop::Slow,
                "{}",
                String::from_utf8_lossy(line)
            );
            assert_eq!((out.consumed, out.lines), (17, 1));
            assert_eq!(out.next_line, 17 + line.len() + 1);
            assert_eq!(strings(&out.texts), ["good"]);
        }
        let long_text = format!("{{\"text\": \"{}\"}}\n", "x".repeat(101));
        let out = parse_block(long_text.as_bytes(), 1, &spec(false), 100, 1 << 20);
        assert_eq!((out.stop, out.consumed), (BlockStop::Slow, 0));
        let long_line = format!("{{\"text\": \"x\", \"pad\": \"{}\"}}\n", " ".repeat(1000));
        let out = parse_block(long_line.as_bytes(), 1, &spec(false), 100, 1 << 20);
        assert_eq!((out.stop, out.consumed), (BlockStop::Slow, 0));
    }

    #[test]
    fn stops_when_the_batch_is_full() {
        let block = "{\"text\": \"aaaa\"}\n".repeat(10);
        let out = parse_block(block.as_bytes(), 1, &spec(false), 3, 1 << 20);
        assert_eq!(
            (out.stop, out.texts.len(), out.lines),
            (BlockStop::Full, 3, 3)
        );
        // The document that reaches the text room is the last one taken.
        let out = parse_block(block.as_bytes(), 1, &spec(false), 100, 9);
        assert_eq!(
            (out.stop, out.texts.len(), out.consumed),
            (BlockStop::Full, 3, 51)
        );
        let rest = &block.as_bytes()[out.consumed..];
        let next = parse_block(rest, 1 + out.lines, &spec(false), 100, 1 << 20);
        assert_eq!((next.stop, next.texts.len()), (BlockStop::End, 7));
        assert_eq!(strings(&next.ids)[0], "f.jsonl:4");
    }

    #[test]
    fn an_id_field_that_is_the_text_field_gives_no_id() {
        let spec = BlockSpec {
            id_field: "text",
            ..spec(false)
        };
        let out = parse_block(b"{\"text\": \"t\"}", 3, &spec, 10, 100);
        assert_eq!(strings(&out.ids), ["f.jsonl:3"]);
        assert_eq!(strings(&out.texts), ["t"]);
    }
}
