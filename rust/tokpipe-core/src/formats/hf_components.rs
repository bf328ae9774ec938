//! The parts of an HF `tokenizer.json` that tokenizers converted from sentencepiece use, read
//! and written: the normalizer steps `Precompiled`, `Replace`, `Strip`, `Prepend` (and
//! `Sequence`s of any steps), the pre-tokenizers `Metaspace` and `Split` (and `Sequence`s of
//! them), the decoders `Metaspace`, `Replace`, `ByteFallback`, `Fuse` and `Strip`, and the
//! `TemplateProcessing` post-processor.
//!
//! (Over 500 lines: about twenty small components, each read and written beside the other,
//! and their checks; splitting them by kind would separate each reader from its writer.)
//!
//! A tokenizer read from a `.model` has sentencepiece's normalizer, which HF has no single
//! step for; it is written the way transformers' `SpmConverter.build_tokenizer_from_spm_proto`
//! (legacy mode) writes one, the HF spelling that encodes most like sentencepiece.

use crate::decoders::DecodeStep;
use crate::error::{shown, shown_json, Error, Result};
use crate::normalizers::replace::{Replace, ReplacePattern};
use crate::normalizers::sentencepiece::SPACE_SYMBOL;
use crate::normalizers::{CharsMap, Normalizer, SentencePieceNormalizer};
use crate::pre_tokenizers::{Metaspace, PreTokenizer, PrependScheme};
use crate::tokenizer::{Decoder, PostProcessor};
use base64::Engine;
use serde_json::{json, Map, Value};
use std::sync::Arc;

fn kind(v: &Value) -> Option<&str> {
    v.get("type").and_then(Value::as_str)
}

/// A token id as a file gives it: an integer from 0 to `u32::MAX - 1` (HF's ids are `u32`, and
/// `u32::MAX` means "no token" here). Anything else, 2^32 included, is no id: it is never
/// wrapped into one.
pub(crate) fn json_id(v: &Value) -> Option<u32> {
    v.as_u64()
        .filter(|&id| id < u32::MAX as u64)
        .map(|id| id as u32)
}

/// `{"String": s}` or `{"Regex": r}`.
fn parse_pattern(v: Option<&Value>) -> Option<ReplacePattern> {
    let v = v?;
    if let Some(s) = v.get("String").and_then(Value::as_str) {
        return Some(ReplacePattern::String(s.to_string()));
    }
    v.get("Regex")
        .and_then(Value::as_str)
        .map(|r| ReplacePattern::Regex(r.to_string()))
}

fn pattern_json(p: &ReplacePattern) -> Value {
    match p {
        ReplacePattern::String(s) => json!({"String": s}),
        ReplacePattern::Regex(r) => json!({"Regex": r}),
    }
}

fn parse_replace(v: &Value, what: &str, source: &str) -> Result<Arc<Replace>> {
    let bad = |msg: String| Error::format(source, format!("{what} Replace: {msg}"));
    let pattern = parse_pattern(v.get("pattern")).ok_or_else(|| bad("no pattern".into()))?;
    let content = v
        .get("content")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("no content".into()))?;
    Ok(Arc::new(Replace::new(pattern, content).map_err(bad)?))
}

/// A normalizer step other than the Unicode normal forms and BERT's (which `hf_json` reads);
/// `None` when `v`'s type is not one of these.
pub(crate) fn parse_normalizer_step(v: &Value, source: &str) -> Result<Option<Normalizer>> {
    let bad = |msg: String| Error::format(source, format!("normalizer: {msg}"));
    Ok(Some(match kind(v) {
        Some("Precompiled") => {
            let text = v
                .get("precompiled_charsmap")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("Precompiled without precompiled_charsmap".into()))?;
            let blob = base64::engine::general_purpose::STANDARD
                .decode(text)
                .map_err(|e| bad(format!("precompiled_charsmap is not base64: {e}")))?;
            Normalizer::Precompiled(Arc::new(CharsMap::from_bytes(&blob).map_err(bad)?))
        }
        Some("Replace") => Normalizer::Replace(parse_replace(v, "normalizer", source)?),
        Some("Strip") => Normalizer::Strip {
            left: v.get("strip_left").and_then(Value::as_bool).unwrap_or(true),
            right: v
                .get("strip_right")
                .and_then(Value::as_bool)
                .unwrap_or(true),
        },
        Some("Prepend") => Normalizer::Prepend(
            v.get("prepend")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("Prepend without prepend".into()))?
                .into(),
        ),
        _ => return Ok(None),
    }))
}

/// The JSON of a normalizer other than the Unicode forms and BERT's.
pub(crate) fn normalizer_step_json(n: &Normalizer, write: &dyn Fn(&Normalizer) -> Value) -> Value {
    match n {
        Normalizer::Precompiled(map) => json!({
            "type": "Precompiled",
            "precompiled_charsmap": base64::engine::general_purpose::STANDARD.encode(map.blob()),
        }),
        Normalizer::Replace(r) => {
            json!({"type": "Replace", "pattern": pattern_json(r.pattern()), "content": r.content()})
        }
        Normalizer::Strip { left, right } => {
            json!({"type": "Strip", "strip_left": left, "strip_right": right})
        }
        Normalizer::Prepend(p) => json!({"type": "Prepend", "prepend": &**p}),
        Normalizer::Sequence(steps) => json!({
            "type": "Sequence",
            "normalizers": steps.iter().map(write).collect::<Vec<_>>(),
        }),
        Normalizer::SentencePiece(spm) => spm_normalizer_json(spm),
        other => json!({"type": other.hf_type()}),
    }
}

/// `Metaspace`, as a pre-tokenizer or a decoder: HF's defaults and its check that a legacy
/// `add_prefix_space: false` goes with `prepend_scheme: never`.
fn parse_metaspace(v: &Value, source: &str) -> Result<Metaspace> {
    let bad = |msg: String| Error::format(source, format!("Metaspace: {msg}"));
    let replacement = v
        .get("replacement")
        .and_then(Value::as_str)
        .and_then(|r| {
            let mut chars = r.chars();
            chars.next().filter(|_| chars.next().is_none())
        })
        .ok_or_else(|| bad("replacement is not one character".into()))?;
    let mut scheme = match v.get("prepend_scheme").and_then(Value::as_str) {
        None => PrependScheme::Always,
        Some(s) => PrependScheme::from_name(s)
            .ok_or_else(|| bad(format!("unknown prepend_scheme {}", shown(s))))?,
    };
    if v.get("add_prefix_space").and_then(Value::as_bool) == Some(false) {
        if scheme != PrependScheme::Never {
            return Err(bad(
                "add_prefix_space does not match declared prepend_scheme".into(),
            ));
        }
        scheme = PrependScheme::Never;
    }
    Ok(Metaspace {
        replacement,
        prepend_scheme: scheme,
        split: v.get("split").and_then(Value::as_bool).unwrap_or(true),
    })
}

fn metaspace_json(m: &Metaspace) -> Value {
    json!({
        "type": "Metaspace",
        "replacement": m.replacement.to_string(),
        "prepend_scheme": m.prepend_scheme.name(),
        "split": m.split,
    })
}

/// The pre-tokenizer of a Unigram tokenizer: `null` (the text whole), `Metaspace`, `Split`
/// (behavior `Isolated`), or a `Sequence` of them.
pub(crate) fn parse_pre_tokenizer(v: &Value, source: &str) -> Result<PreTokenizer> {
    let bad = |msg: String| Error::format(source, format!("pre_tokenizer: {msg}"));
    match kind(v) {
        None if v.is_null() => Ok(PreTokenizer::Whole),
        Some("Metaspace") => Ok(PreTokenizer::Metaspace(parse_metaspace(v, source)?)),
        Some("Split") => {
            if v.get("behavior").and_then(Value::as_str) != Some("Isolated")
                || v.get("invert").and_then(Value::as_bool) == Some(true)
            {
                return Err(bad(
                    "only Split with behavior Isolated and invert false is supported".into(),
                ));
            }
            let regex = match parse_pattern(v.get("pattern")) {
                Some(ReplacePattern::Regex(r)) => r,
                Some(ReplacePattern::String(s)) => fancy_regex::escape(&s).into_owned(),
                None => return Err(bad("Split without a pattern".into())),
            };
            PreTokenizer::split_isolated(&regex)
        }
        Some("Sequence") => {
            let steps = v
                .get("pretokenizers")
                .and_then(Value::as_array)
                .ok_or_else(|| bad("Sequence without pretokenizers".into()))?;
            let steps = steps
                .iter()
                .map(|s| parse_pre_tokenizer(s, source))
                .collect::<Result<Vec<_>>>()?;
            Ok(match steps.len() {
                0 => PreTokenizer::Whole,
                1 => steps.into_iter().next().expect("one step"),
                _ => PreTokenizer::Sequence(steps.into()),
            })
        }
        Some(other) => Err(bad(format!(
            "{} is not supported with Unigram",
            shown(other)
        ))),
        None => Err(bad("no type".into())),
    }
}

pub(crate) fn pre_tokenizer_json(p: &PreTokenizer) -> Result<Value> {
    Ok(match p {
        PreTokenizer::Whole => Value::Null,
        PreTokenizer::Metaspace(m) => metaspace_json(m),
        PreTokenizer::SplitIsolated { pattern, .. } => json!({
            "type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": false,
        }),
        PreTokenizer::Sequence(steps) => json!({
            "type": "Sequence",
            "pretokenizers": steps.iter().map(pre_tokenizer_json).collect::<Result<Vec<_>>>()?,
        }),
        other => {
            return Err(Error::InvalidArgument(format!(
                "the pre-tokenizer {:?} cannot be written with a Unigram model",
                other.pattern()
            )))
        }
    })
}

fn parse_decode_step(v: &Value, source: &str, out: &mut Vec<DecodeStep>) -> Result<()> {
    let bad = |msg: String| Error::format(source, format!("decoder: {msg}"));
    match kind(v) {
        Some("Metaspace") => {
            let m = parse_metaspace(v, source)?;
            out.push(DecodeStep::Metaspace {
                replacement: m.replacement,
                prepend_scheme: m.prepend_scheme,
            });
        }
        Some("Replace") => out.push(DecodeStep::Replace(parse_replace(v, "decoder", source)?)),
        Some("ByteFallback") => out.push(DecodeStep::ByteFallback),
        Some("Fuse") => out.push(DecodeStep::Fuse),
        Some("Strip") => {
            let content = v
                .get("content")
                .and_then(Value::as_str)
                .and_then(|c| c.chars().next())
                .ok_or_else(|| bad("Strip without content".into()))?;
            let count = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0) as usize;
            out.push(DecodeStep::Strip {
                content,
                start: count("start"),
                stop: count("stop"),
            });
        }
        Some("Sequence") => {
            let steps = v
                .get("decoders")
                .and_then(Value::as_array)
                .ok_or_else(|| bad("Sequence without decoders".into()))?;
            if steps.is_empty() {
                // HF joins the tokens as they are.
                out.push(DecodeStep::Fuse);
            }
            for s in steps {
                parse_decode_step(s, source, out)?;
            }
        }
        Some(other) => {
            return Err(bad(format!(
                "{} is not supported with Unigram",
                shown(other)
            )))
        }
        None => return Err(bad("no type".into())),
    }
    Ok(())
}

/// The decoder of a Unigram tokenizer; `null` is HF's default (tokens joined by spaces).
pub(crate) fn parse_decoder(v: &Value, source: &str) -> Result<Decoder> {
    let mut steps = Vec::new();
    if !v.is_null() {
        parse_decode_step(v, source, &mut steps)?;
    }
    Ok(Decoder::Steps(steps.into()))
}

fn decode_step_json(s: &DecodeStep) -> Value {
    match s {
        DecodeStep::Replace(r) => {
            json!({"type": "Replace", "pattern": pattern_json(r.pattern()), "content": r.content()})
        }
        DecodeStep::ByteFallback => json!({"type": "ByteFallback"}),
        DecodeStep::Fuse => json!({"type": "Fuse"}),
        DecodeStep::Strip {
            content,
            start,
            stop,
        } => json!({"type": "Strip", "content": content.to_string(), "start": start, "stop": stop}),
        DecodeStep::Metaspace {
            replacement,
            prepend_scheme,
        } => metaspace_json(&Metaspace {
            replacement: *replacement,
            prepend_scheme: *prepend_scheme,
            split: true,
        }),
    }
}

pub(crate) fn decode_steps_json(steps: &[DecodeStep]) -> Value {
    match steps {
        [] => Value::Null,
        [one] => decode_step_json(one),
        more => {
            json!({"type": "Sequence", "decoders": more.iter().map(decode_step_json).collect::<Vec<_>>()})
        }
    }
}

/// `TemplateProcessing` as special tokens before and after the sequence; `null` adds none.
pub(crate) fn parse_template(v: &Value, source: &str) -> Result<Option<PostProcessor>> {
    let bad = |msg: &str| Error::format(source, format!("post_processor: {msg}"));
    match kind(v) {
        None if v.is_null() => return Ok(None),
        Some("TemplateProcessing") => {}
        Some(other) => {
            return Err(bad(&format!(
                "{} is not supported with Unigram",
                shown(other)
            )))
        }
        None => return Err(bad("no type")),
    }
    let single = v
        .get("single")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("TemplateProcessing without single"))?;
    let (mut before, mut after) = (Vec::new(), Vec::new());
    let mut seen_a = false;
    for piece in single {
        if let Some(name) = piece
            .get("SpecialToken")
            .and_then(|s| s.get("id"))
            .and_then(Value::as_str)
        {
            let side = if seen_a { &mut after } else { &mut before };
            side.extend(template_special_token(v, name, source)?);
        } else if piece
            .get("Sequence")
            .and_then(|s| s.get("id"))
            .and_then(Value::as_str)
            == Some("A")
            && !seen_a
        {
            seen_a = true;
        } else {
            return Err(bad("the single template must be special tokens around $A"));
        }
    }
    if !seen_a {
        return Err(bad("the single template has no $A"));
    }
    Ok(Some(PostProcessor::Template { before, after }))
}

/// The `(token, id)` pairs of the special token `name` of a `TemplateProcessing`, each id an
/// id (see [`json_id`]), as many ids as tokens.
fn template_special_token(v: &Value, name: &str, source: &str) -> Result<Vec<(String, u32)>> {
    let bad = |msg: String| {
        Error::format(
            source,
            format!("post_processor: special token {} {msg}", shown(name)),
        )
    };
    let entry = v
        .get("special_tokens")
        .and_then(|s| s.get(name))
        .ok_or_else(|| bad("is not defined".into()))?;
    let ids = entry.get("ids").and_then(Value::as_array);
    let tokens = entry.get("tokens").and_then(Value::as_array);
    let (Some(ids), Some(tokens)) = (ids, tokens) else {
        return Err(bad("has no ids or tokens".into()));
    };
    if ids.len() != tokens.len() {
        return Err(bad(format!(
            "has {} ids for {} tokens",
            ids.len(),
            tokens.len()
        )));
    }
    ids.iter()
        .zip(tokens)
        .map(|(id, token)| match (json_id(id), token.as_str()) {
            (Some(id), Some(token)) => Ok((token.to_string(), id)),
            _ => Err(bad(format!("has the malformed id {}", shown_json(id)))),
        })
        .collect()
}

/// Checks a post-processor a byte-level BPE file may hold and returns the special tokens it
/// names: `ByteLevel` (offsets only), `TemplateProcessing`, `BertProcessing`,
/// `RobertaProcessing`, or a `Sequence` of them, with ids that are ids. HF refuses any other
/// type and ids outside `u32`; so do we. (A byte-level tokenizer adds no special tokens when
/// encoding: see `Tokenizer::encode_with`.)
pub(crate) fn check_post_processor(v: &Value, source: &str) -> Result<Vec<(String, u32)>> {
    let bad = |msg: String| Error::format(source, format!("post_processor: {msg}"));
    let mut named = Vec::new();
    match kind(v) {
        None if v.is_null() => {}
        Some("ByteLevel") => {}
        Some("TemplateProcessing") => {
            let map = v
                .get("special_tokens")
                .and_then(Value::as_object)
                .ok_or_else(|| bad("TemplateProcessing without special_tokens".into()))?;
            for name in map.keys() {
                named.extend(template_special_token(v, name, source)?);
            }
            if v.get("single").and_then(Value::as_array).is_none() {
                return Err(bad("TemplateProcessing without single".into()));
            }
            for template in ["single", "pair"] {
                let pieces = v.get(template).and_then(Value::as_array);
                for piece in pieces.into_iter().flatten() {
                    if let Some(name) = piece.get("SpecialToken").and_then(|s| s.get("id")) {
                        let name = name.as_str().unwrap_or_default();
                        if !map.contains_key(name) {
                            return Err(bad(format!(
                                "the {template} template uses the undefined special token {}",
                                shown(name)
                            )));
                        }
                    } else if piece.get("Sequence").is_none() {
                        return Err(bad(format!(
                            "the {template} template holds {}",
                            shown_json(piece)
                        )));
                    }
                }
            }
        }
        Some(t @ ("BertProcessing" | "RobertaProcessing")) => {
            for field in ["cls", "sep"] {
                let pair = v.get(field).and_then(Value::as_array).map(Vec::as_slice);
                match pair {
                    Some([token, id]) if token.is_string() => match json_id(id) {
                        Some(id) => named.push((token.as_str().unwrap_or_default().into(), id)),
                        None => {
                            return Err(bad(format!(
                                "{t} {field} has the malformed id {}",
                                shown_json(id)
                            )))
                        }
                    },
                    _ => return Err(bad(format!("{t} without a [token, id] {field}"))),
                }
            }
        }
        Some("Sequence") => {
            let steps = v
                .get("processors")
                .and_then(Value::as_array)
                .ok_or_else(|| bad("Sequence without processors".into()))?;
            for step in steps {
                named.extend(check_post_processor(step, source)?);
            }
        }
        Some(other) => return Err(bad(format!("unknown type {}", shown(other)))),
        None => return Err(bad("no type".into())),
    }
    Ok(named)
}

/// Checks the decoder of a byte-level BPE file: `null`, `ByteLevel`, or a `Sequence` of those
/// (what HF's converters write). Its ids are decoded as their bytes; another decoder would
/// make HF give other text, and an unknown one HF refuses.
pub(crate) fn check_byte_level_decoder(v: &Value, source: &str) -> Result<()> {
    let bad = |msg: String| Error::format(source, format!("decoder: {msg}"));
    match kind(v) {
        None if v.is_null() => Ok(()),
        Some("ByteLevel") => Ok(()),
        Some("Sequence") => v
            .get("decoders")
            .and_then(Value::as_array)
            .ok_or_else(|| bad("Sequence without decoders".into()))?
            .iter()
            .try_for_each(|step| check_byte_level_decoder(step, source)),
        Some(other) => Err(bad(format!(
            "{} is not supported with byte-level BPE (ByteLevel is)",
            shown(other)
        ))),
        None => Err(bad("no type".into())),
    }
}

pub(crate) fn template_json(before: &[(String, u32)], after: &[(String, u32)]) -> Value {
    let special =
        |t: &(String, u32), type_id: u32| json!({"SpecialToken": {"id": t.0, "type_id": type_id}});
    let mut single: Vec<Value> = before.iter().map(|t| special(t, 0)).collect();
    single.push(json!({"Sequence": {"id": "A", "type_id": 0}}));
    single.extend(after.iter().map(|t| special(t, 0)));
    let mut pair = single.clone();
    pair.push(json!({"Sequence": {"id": "B", "type_id": 1}}));
    pair.extend(after.iter().map(|t| special(t, 1)));
    let mut tokens = Map::new();
    for (t, id) in before.iter().chain(after) {
        tokens.insert(t.clone(), json!({"id": t, "ids": [id], "tokens": [t]}));
    }
    json!({"type": "TemplateProcessing", "single": single, "pair": pair, "special_tokens": tokens})
}

/// sentencepiece's normalizer as HF steps (transformers' legacy spelling).
fn spm_normalizer_json(n: &SentencePieceNormalizer) -> Value {
    let mut steps = Vec::new();
    if let Some(map) = n.charsmap() {
        steps.push(normalizer_step_json(
            &Normalizer::Precompiled(Arc::new(map.clone())),
            &|_| Value::Null,
        ));
    }
    let replace = |pattern: ReplacePattern, content: &str| json!({"type": "Replace", "pattern": pattern_json(&pattern), "content": content});
    if n.remove_extra_whitespaces() {
        steps.push(replace(ReplacePattern::Regex(r"\A +| +\z".into()), ""));
        steps.push(replace(ReplacePattern::Regex(" {2,}".into()), " "));
    }
    if n.escape_whitespaces() {
        steps.push(replace(ReplacePattern::String(" ".into()), SPACE_SYMBOL));
    }
    if n.add_dummy_prefix() {
        // Metaspace adds no prefix to text that already starts with ▁; sentencepiece does.
        steps.push(replace(
            ReplacePattern::Regex(format!(r"\A{SPACE_SYMBOL}")),
            &SPACE_SYMBOL.repeat(2),
        ));
    }
    json!({"type": "Sequence", "normalizers": steps})
}

/// The pre-tokenizer and decoder HF needs to go with [`spm_normalizer_json`]: the dummy
/// prefix from `Metaspace` (no split), user-defined symbols isolated so no piece crosses them;
/// `▁` back to spaces, byte pieces to bytes, the first space dropped.
pub(crate) fn spm_pre_tokenizer_and_decoder_json(
    n: &SentencePieceNormalizer,
    user_defined: &[&str],
    byte_fallback: bool,
) -> Result<(Value, Value)> {
    if n.treat_whitespace_as_suffix() {
        return Err(Error::InvalidArgument(
            "a sentencepiece model with treat_whitespace_as_suffix cannot be written as tokenizer.json"
                .into(),
        ));
    }
    let mut pre = Vec::new();
    if n.add_dummy_prefix() {
        pre.push(metaspace_json(&Metaspace {
            replacement: '▁',
            prepend_scheme: PrependScheme::Always,
            split: false,
        }));
    }
    if !user_defined.is_empty() {
        let mut symbols = user_defined.to_vec();
        symbols.sort_by_key(|s| std::cmp::Reverse(s.chars().count()));
        let pattern = symbols
            .iter()
            .map(|s| fancy_regex::escape(s).into_owned())
            .collect::<Vec<_>>()
            .join("|");
        pre.push(json!({"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": false}));
    }
    let pre = match pre.len() {
        0 => Value::Null,
        _ => json!({"type": "Sequence", "pretokenizers": pre}),
    };
    let mut dec =
        vec![json!({"type": "Replace", "pattern": {"String": SPACE_SYMBOL}, "content": " "})];
    if byte_fallback {
        dec.push(json!({"type": "ByteFallback"}));
    }
    if n.add_dummy_prefix() {
        dec.push(json!({"type": "Fuse"}));
        dec.push(json!({"type": "Strip", "content": " ", "start": 1, "stop": 0}));
    } else if byte_fallback {
        dec.push(json!({"type": "Fuse"}));
    }
    Ok((pre, json!({"type": "Sequence", "decoders": dec})))
}
