//! HF `tokenizer.json` for byte-level BPE, WordPiece (BERT), Unigram (sentencepiece-style) and
//! BPE over characters (Llama-1/2, Mistral).
//!
//! (Over 500 lines: the reader and writer of four model kinds, which share their top-level
//! fields; the per-kind parts are a few dozen lines each.)
//!
//! Read, byte-level BPE: model `BPE` (vocab, merges as `"a b"` strings or `["a", "b"]` pairs,
//! `ignore_merges`), normalizer `null` or a Unicode normal form, pre-tokenizer `ByteLevel`
//! (GPT-2 regex) or `Sequence[Split(Regex), ByteLevel(use_regex=false)]`, and `added_tokens`;
//! the decoder must be `ByteLevel` (or none), and the post-processor is checked (a type HF
//! knows, ids that are tokens) but adds nothing when encoding, as documented for byte-level
//! tokenizers.
//! A `BPE` model without a `ByteLevel` pre-tokenizer is BPE over characters, as HF runs it
//! (`unk_token`, `fuse_unk`, `byte_fallback`, `ignore_merges`; see [`crate::models::bpe`]),
//! with the sentencepiece-style steps Unigram files use (Llama's `Prepend`/`Replace`
//! normalizer, or its `Metaspace` pre-tokenizer; `ByteFallback`/`Fuse`/`Strip` decoders).
//! WordPiece: model `WordPiece` (see [`super::hf_wordpiece`]), normalizer
//! `BertNormalizer` (or none, or a normal form), pre-tokenizer `BertPreTokenizer`,
//! post-processor `BertProcessing` or the `TemplateProcessing` `[CLS] $A [SEP]` HF writes for
//! BERT, decoder `WordPiece`. Unigram: model `Unigram` (see [`super::hf_unigram`]) with the steps HF's sentencepiece converters write
//! (see [`super::hf_components`]), encoded with HF's rules. Anything else is refused with a
//! message naming the field, rather than loaded into a tokenizer that would quietly give other
//! ids than HF does.
//!
//! Written: the same shapes, so `tokenizers.Tokenizer.from_file` loads our output and gives
//! our ids.
//!
//! Ids in the file are checked as [`super`] describes: integers below `u32::MAX`, never
//! wrapped, within [`crate::models::id_limit`] of the vocabulary's size.

use super::write_atomic;
use super::{hf_components, hf_unigram, hf_wordpiece};
use crate::error::{shown, shown_json, Error, Result};
use crate::models::bpe::{BpeModel, MergeRule};
use crate::models::pieces::PieceKind;
use crate::models::unigram::UnigramModel;
use crate::models::wordpiece::WordPieceModel;
use crate::models::ModelWrapper;
use crate::normalizers::{BertNormalizer, Normalizer};
use crate::pre_tokenizers::{byte_level, PreTokenizer, Preset};
use crate::tokenizer::{AddedToken, Decoder, PostProcessor, Tokenizer};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::path::Path;

pub fn load(path: &Path) -> Result<Tokenizer> {
    let raw = super::read_maybe_gzip(path)?;
    from_slice(&raw, &path.display().to_string())
}

/// The tokenizer of a `tokenizer.json`'s text; `source` names it in errors, which are all
/// [`Error::Format`] (a special token refused by [`Tokenizer::new`] included).
pub fn from_slice(json: &[u8], source: &str) -> Result<Tokenizer> {
    let tok = parse(json, source).map_err(|e| match e {
        Error::InvalidArgument(message) => Error::format(source, message),
        e => e,
    })?;
    check_post_processor_ids(&tok, source)?;
    Ok(tok)
}

/// The ids a post-processor adds must be tokens, or encoding would give ids nothing decodes.
fn check_post_processor_ids(tok: &Tokenizer, source: &str) -> Result<()> {
    let named: Vec<&(String, u32)> = match tok.post_processor() {
        None => return Ok(()),
        Some(PostProcessor::Bert { cls, sep }) => vec![cls, sep],
        Some(PostProcessor::Template { before, after }) => before.iter().chain(after).collect(),
    };
    check_named_ids(tok, named.into_iter().cloned(), source)
}

fn check_named_ids(
    tok: &Tokenizer,
    named: impl IntoIterator<Item = (String, u32)>,
    source: &str,
) -> Result<()> {
    for (token, id) in named {
        if tok.id_to_token(id).is_none() {
            return Err(Error::format(
                source,
                format!(
                    "post_processor: special token {} has id {id}, which is no token of the \
                     vocabulary (size {})",
                    shown(&token),
                    tok.vocab_size()
                ),
            ));
        }
    }
    Ok(())
}

fn parse(json: &[u8], source: &str) -> Result<Tokenizer> {
    let root: Value = serde_json::from_slice(json)
        .map_err(|e| Error::format(source, format!("invalid JSON: {e}")))?;
    let bad = |msg: String| Error::format(source, msg);

    let model = root
        .get("model")
        .filter(|m| m.is_object())
        .ok_or_else(|| bad("no `model` object".into()))?;
    let model_type = model.get("type").and_then(Value::as_str).unwrap_or("BPE");
    let added = parse_added_tokens(&root, source)?;
    match model_type {
        "BPE" if !has_byte_level(root.get("pre_tokenizer").unwrap_or(&Value::Null)) => {
            return char_bpe_from_json(&root, model, added, source)
        }
        "BPE" => {}
        "WordPiece" => return wordpiece_from_json(&root, model, added, source),
        "Unigram" => return unigram_from_json(&root, model, added, source),
        other => {
            return Err(bad(format!(
                "model type {} is not supported yet (byte-level BPE, WordPiece and Unigram are)",
                shown(other)
            )))
        }
    }
    for field in [
        "continuing_subword_prefix",
        "end_of_word_suffix",
        "unk_token",
    ] {
        if model.get(field).is_some_and(|v| !v.is_null()) {
            return Err(bad(format!(
                "model.{field} is set; byte-level BPE with it is not supported"
            )));
        }
    }
    if model.get("byte_fallback").and_then(Value::as_bool) == Some(true) {
        return Err(bad(
            "model.byte_fallback is not supported (it is for non-byte-level BPE)".into(),
        ));
    }
    reject_dropout(model, source)?;
    let ignore_merges = model
        .get("ignore_merges")
        .and_then(Value::as_bool)
        .unwrap_or(false);

    let added_text: HashMap<u32, &str> = added.iter().map(|t| (t.id, t.content.as_str())).collect();

    let entries = parse_vocab(model, source)?;
    let ids: HashMap<&str, u32> = entries.iter().copied().collect();
    let mut vocab = Vec::with_capacity(entries.len());
    for (token, id) in entries {
        // An added token's vocab entry is usually its raw text (spaces included, so not
        // byte-level). When it is the byte-level spelling of the same string it is also an
        // ordinary token (HF's one string -> id map): a trained vocab whose special token
        // spells a byte or a merge needs it, or that byte could not be encoded.
        let decoded = byte_level::decode(token);
        if let Some(&content) = added_text.get(&id) {
            if decoded.is_none() || content != token {
                continue;
            }
        }
        let bytes = decoded.ok_or_else(|| {
            bad(format!(
                "vocab entry {} is not byte-level text",
                shown(token)
            ))
        })?;
        vocab.push((bytes, id));
    }

    let merges = parse_merges(model, &ids, source)?;
    let model = BpeModel::from_merges(vocab, merges, ignore_merges, source)?;

    let part = |name: &str| root.get(name).unwrap_or(&Value::Null);
    let normalizer = parse_normalizer(part("normalizer"), source)?;
    let (pre, add_prefix_space) = parse_pre_tokenizer(part("pre_tokenizer"), source)?;
    hf_components::check_byte_level_decoder(part("decoder"), source)?;
    let named = hf_components::check_post_processor(part("post_processor"), source)?;
    let tok = Tokenizer::new(pre, model, added)?
        .with_normalizer(normalizer)
        .with_add_prefix_space(add_prefix_space);
    check_named_ids(&tok, named, source)?;
    Ok(tok)
}

/// `model.merges` as token-id pairs: `"left right"` strings or `["left", "right"]` pairs.
/// BPE dropout makes encoding random; a file that asks for it is refused.
fn reject_dropout(model: &Value, source: &str) -> Result<()> {
    if model
        .get("dropout")
        .and_then(Value::as_f64)
        .is_some_and(|d| d > 0.0)
    {
        return Err(Error::format(
            source,
            "model.dropout > 0 is not supported (encoding would be random)",
        ));
    }
    Ok(())
}

/// `model.vocab` (an object of token -> id) as pairs, each id checked.
fn parse_vocab<'a>(model: &'a Value, source: &str) -> Result<Vec<(&'a str, u32)>> {
    let bad = |msg: String| Error::format(source, msg);
    let vocab = model
        .get("vocab")
        .and_then(Value::as_object)
        .ok_or_else(|| bad("model.vocab is not an object".into()))?;
    vocab
        .iter()
        .map(|(token, id)| {
            let id = hf_components::json_id(id).ok_or_else(|| {
                bad(format!(
                    "vocab entry {} has the id {}, not an integer from 0 to 2^32 - 2",
                    shown(token),
                    shown_json(id)
                ))
            })?;
            Ok((token.as_str(), id))
        })
        .collect()
}

fn parse_merges(model: &Value, ids: &HashMap<&str, u32>, source: &str) -> Result<Vec<(u32, u32)>> {
    let bad = |msg: String| Error::format(source, msg);
    let merges_val = model
        .get("merges")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("model.merges is not a list".into()))?;
    let mut merges = Vec::with_capacity(merges_val.len());
    for (n, m) in merges_val.iter().enumerate() {
        let (l, r) = match m {
            Value::String(s) => s
                .split_once(' ')
                .ok_or_else(|| bad(format!("merges[{n}] {} is not `left right`", shown(s))))?,
            Value::Array(a) if a.len() == 2 && a.iter().all(Value::is_string) => (
                a[0].as_str().unwrap_or_default(),
                a[1].as_str().unwrap_or_default(),
            ),
            other => {
                return Err(bad(format!(
                    "merges[{n}] is neither a string nor a pair: {}",
                    shown_json(other)
                )))
            }
        };
        merges.push(super::gpt2::pair_ids(l, r, ids, source)?);
    }
    Ok(merges)
}

/// Whether a pre-tokenizer is or holds HF's `ByteLevel` (byte-level BPE).
fn has_byte_level(pre: &Value) -> bool {
    match pre.get("type").and_then(Value::as_str) {
        Some("ByteLevel") => true,
        Some("Sequence") => pre
            .get("pretokenizers")
            .and_then(Value::as_array)
            .is_some_and(|steps| steps.iter().any(has_byte_level)),
        _ => false,
    }
}

/// The rest of a file whose model is BPE over characters.
fn char_bpe_from_json(
    root: &Value,
    model: &Value,
    added: Vec<AddedToken>,
    source: &str,
) -> Result<Tokenizer> {
    let bad = |msg: String| Error::format(source, msg);
    for field in ["continuing_subword_prefix", "end_of_word_suffix"] {
        if model
            .get(field)
            .is_some_and(|v| !v.is_null() && v.as_str() != Some(""))
        {
            return Err(bad(format!(
                "model.{field} is set; BPE with it is not supported"
            )));
        }
    }
    reject_dropout(model, source)?;
    let flag = |name: &str| model.get(name).and_then(Value::as_bool).unwrap_or(false);
    let entries = parse_vocab(model, source)?;
    let ids: HashMap<&str, u32> = entries.iter().copied().collect();
    let vocab: Vec<(String, u32)> = entries.iter().map(|&(t, id)| (t.to_string(), id)).collect();
    let unk = match model.get("unk_token") {
        None | Some(Value::Null) => None,
        Some(Value::String(t)) => Some(*ids.get(t.as_str()).ok_or_else(|| {
            bad(format!(
                "model.unk_token {} is not in the vocabulary",
                shown(t)
            ))
        })?),
        Some(other) => {
            return Err(bad(format!(
                "model.unk_token {} is not a string",
                shown_json(other)
            )))
        }
    };
    let merges = parse_merges(model, &ids, source)?;
    let model = BpeModel::from_hf_chars(
        vocab,
        merges,
        unk,
        flag("byte_fallback"),
        flag("fuse_unk"),
        flag("ignore_merges"),
        source,
    )?;
    with_spm_style_pipeline(root, model, added, source)
}

/// A Unigram or character-level BPE model with the rest of its file: the normalizer, the
/// Metaspace-family pre-tokenizer, template post-processor and decoder of sentencepiece-style
/// files (HF's converters for T5, Llama and the like).
fn with_spm_style_pipeline(
    root: &Value,
    model: impl Into<ModelWrapper>,
    added: Vec<AddedToken>,
    source: &str,
) -> Result<Tokenizer> {
    let part = |name: &str| root.get(name).unwrap_or(&Value::Null);
    let normalizer = parse_normalizer(part("normalizer"), source)?;
    let pre = hf_components::parse_pre_tokenizer(part("pre_tokenizer"), source)?;
    let post = hf_components::parse_template(part("post_processor"), source)?;
    let decoder = hf_components::parse_decoder(part("decoder"), source)?;
    Ok(Tokenizer::new(pre, model, added)?
        .with_normalizer(normalizer)
        .with_post_processor(post)
        .with_decoder(decoder))
}

/// `added_tokens`: matched as whole strings (for BPE their vocab entries are not byte-level
/// text).
fn parse_added_tokens(root: &Value, source: &str) -> Result<Vec<AddedToken>> {
    let bad = |msg: String| Error::format(source, msg);
    let mut added = Vec::new();
    for (i, t) in root
        .get("added_tokens")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let content = t
            .get("content")
            .and_then(Value::as_str)
            .ok_or_else(|| bad(format!("added_tokens[{i}] has no content")))?;
        let id = match t.get("id") {
            None | Some(Value::Null) => return Err(bad(format!("added_tokens[{i}] has no id"))),
            Some(id) => hf_components::json_id(id).ok_or_else(|| {
                bad(format!(
                    "added_tokens[{i}] {} has the id {}, not an integer from 0 to 2^32 - 2",
                    shown(content),
                    shown_json(id)
                ))
            })?,
        };
        for flag in ["lstrip", "rstrip", "single_word"] {
            if t.get(flag).and_then(Value::as_bool) == Some(true) {
                return Err(bad(format!(
                    "added token {} sets {flag}, which is not supported yet",
                    shown(content)
                )));
            }
        }
        let special = t.get("special").and_then(Value::as_bool).unwrap_or(false);
        added.push(AddedToken {
            content: content.to_string(),
            id,
            special,
            normalized: t
                .get("normalized")
                .and_then(Value::as_bool)
                .unwrap_or(!special),
        });
    }
    Ok(added)
}

/// The rest of a file whose model is WordPiece.
fn wordpiece_from_json(
    root: &Value,
    model: &Value,
    added: Vec<AddedToken>,
    source: &str,
) -> Result<Tokenizer> {
    let bad = |msg: String| Error::format(source, msg);
    let model = hf_wordpiece::from_json(model, source)?;
    let normalizer = parse_normalizer(root.get("normalizer").unwrap_or(&Value::Null), source)?;
    let pre = root.get("pre_tokenizer").unwrap_or(&Value::Null);
    match pre.get("type").and_then(Value::as_str) {
        Some("BertPreTokenizer") => {}
        other => {
            return Err(bad(format!(
                "pre_tokenizer {} with WordPiece is not supported yet (BertPreTokenizer is)",
                other.map_or("null".into(), shown)
            )))
        }
    }
    let post =
        parse_bert_post_processor(root.get("post_processor").unwrap_or(&Value::Null), source)?;
    let decoder = root.get("decoder").unwrap_or(&Value::Null);
    let decoder = match decoder.get("type").and_then(Value::as_str) {
        None if decoder.is_null() => Decoder::ByteLevel,
        Some("WordPiece") => Decoder::WordPiece {
            prefix: decoder
                .get("prefix")
                .and_then(Value::as_str)
                .unwrap_or("##")
                .to_string(),
            cleanup: decoder
                .get("cleanup")
                .and_then(Value::as_bool)
                .unwrap_or(true),
        },
        other => {
            return Err(bad(format!(
                "decoder {} is not supported with WordPiece",
                other.map_or("without a type".into(), shown)
            )))
        }
    };
    Ok(Tokenizer::new(PreTokenizer::Bert, model, added)?
        .with_normalizer(normalizer)
        .with_post_processor(post)
        .with_decoder(decoder))
}

/// The rest of a file whose model is Unigram.
fn unigram_from_json(
    root: &Value,
    model: &Value,
    added: Vec<AddedToken>,
    source: &str,
) -> Result<Tokenizer> {
    let model = hf_unigram::from_json(model, &added, source)?;
    with_spm_style_pipeline(root, model, added, source)
}

/// `BertProcessing`, or a `TemplateProcessing` whose single-sequence template is
/// `[CLS] $A [SEP]` (what HF writes for BERT today); `null` adds nothing.
fn parse_bert_post_processor(v: &Value, source: &str) -> Result<Option<PostProcessor>> {
    let bad = |msg: &str| Error::format(source, format!("post_processor: {msg}"));
    let pair = |v: Option<&Value>| -> Option<(String, u32)> {
        match v?.as_array()?.as_slice() {
            [token, id] => Some((token.as_str()?.to_string(), hf_components::json_id(id)?)),
            _ => None,
        }
    };
    match v.get("type").and_then(Value::as_str) {
        None if v.is_null() => Ok(None),
        Some("BertProcessing") => {
            let cls = pair(v.get("cls")).ok_or_else(|| bad("BertProcessing without cls"))?;
            let sep = pair(v.get("sep")).ok_or_else(|| bad("BertProcessing without sep"))?;
            Ok(Some(PostProcessor::Bert { cls, sep }))
        }
        Some("TemplateProcessing") => match hf_components::parse_template(v, source)? {
            Some(PostProcessor::Template { before, after })
                if before.len() == 1 && after.len() == 1 =>
            {
                let (cls, sep) = (before[0].clone(), after[0].clone());
                Ok(Some(PostProcessor::Bert { cls, sep }))
            }
            _ => Err(bad(
                "only a template of one special token, $A, one special token is supported",
            )),
        },
        Some(other) => Err(bad(&format!(
            "{} is not supported with WordPiece",
            shown(other)
        ))),
        None => Err(bad("no type")),
    }
}

fn parse_normalizer(v: &Value, source: &str) -> Result<Option<Normalizer>> {
    match v.get("type").and_then(Value::as_str) {
        None if v.is_null() => Ok(None),
        Some("Sequence")
            if v.get("normalizers")
                .and_then(Value::as_array)
                .is_some_and(Vec::is_empty) =>
        {
            Ok(None)
        }
        Some("Sequence") => match v
            .get("normalizers")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
        {
            Some([one]) => parse_normalizer(one, source),
            Some(steps) => {
                let steps = steps
                    .iter()
                    .filter_map(|s| parse_normalizer(s, source).transpose())
                    .collect::<Result<Vec<_>>>()?;
                Ok(Some(Normalizer::Sequence(steps.into())))
            }
            None => Err(Error::format(
                source,
                "normalizer Sequence without normalizers",
            )),
        },
        Some("BertNormalizer") => {
            let flag =
                |name: &str, default: bool| v.get(name).and_then(Value::as_bool).unwrap_or(default);
            Ok(Some(Normalizer::Bert(BertNormalizer {
                clean_text: flag("clean_text", true),
                handle_chinese_chars: flag("handle_chinese_chars", true),
                strip_accents: v.get("strip_accents").and_then(Value::as_bool),
                lowercase: flag("lowercase", true),
            })))
        }
        Some(t) => match Normalizer::from_hf_type(t) {
            Some(n) => Ok(Some(n)),
            None => hf_components::parse_normalizer_step(v, source)?
                .map(Some)
                .ok_or_else(|| {
                    Error::format(
                        source,
                        format!("normalizer {} is not supported yet", shown(t)),
                    )
                }),
        },
        None => Err(Error::format(source, "normalizer has no type")),
    }
}

/// Returns the pre-tokenizer and ByteLevel's `add_prefix_space`.
fn parse_pre_tokenizer(v: &Value, source: &str) -> Result<(PreTokenizer, bool)> {
    let bad = |msg: &str| Error::format(source, format!("pre_tokenizer: {msg}"));
    let kind = v.get("type").and_then(Value::as_str);
    let byte_level_flags = |bl: &Value| {
        (
            bl.get("use_regex").and_then(Value::as_bool).unwrap_or(true),
            bl.get("add_prefix_space")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        )
    };
    match kind {
        Some("ByteLevel") => {
            let (use_regex, prefix) = byte_level_flags(v);
            if !use_regex {
                return Err(bad("ByteLevel without a regex split is not supported"));
            }
            Ok((PreTokenizer::Preset(Preset::Gpt2), prefix))
        }
        Some("Sequence") => {
            let steps = v
                .get("pretokenizers")
                .and_then(Value::as_array)
                .ok_or_else(|| bad("Sequence without pretokenizers"))?;
            match steps.as_slice() {
                [one] => parse_pre_tokenizer(one, source),
                [split, bl]
                    if split.get("type").and_then(Value::as_str) == Some("Split")
                        && bl.get("type").and_then(Value::as_str) == Some("ByteLevel") =>
                {
                    let (use_regex, prefix) = byte_level_flags(bl);
                    if use_regex {
                        return Err(bad(
                            "Split followed by ByteLevel(use_regex=true) is not supported",
                        ));
                    }
                    if split.get("behavior").and_then(Value::as_str) != Some("Isolated")
                        || split.get("invert").and_then(Value::as_bool) == Some(true)
                    {
                        return Err(bad(
                            "only Split with behavior Isolated and invert false is supported",
                        ));
                    }
                    let pattern = split
                        .get("pattern")
                        .ok_or_else(|| bad("Split without pattern"))?;
                    let pre = match (
                        pattern.get("Regex").and_then(Value::as_str),
                        pattern.get("String").and_then(Value::as_str),
                    ) {
                        (Some(re), _) => PreTokenizer::new(re)?,
                        (None, Some(s)) => PreTokenizer::regex(&fancy_regex::escape(s))?,
                        _ => return Err(bad("Split pattern is neither Regex nor String")),
                    };
                    Ok((pre, prefix))
                }
                _ => Err(bad(
                    "only ByteLevel or Sequence[Split, ByteLevel] is supported",
                )),
            }
        }
        Some(other) => Err(bad(&format!("{} is not supported yet", shown(other)))),
        None => Err(bad("missing; byte-level BPE needs ByteLevel")),
    }
}

fn normalizer_json(n: Option<&Normalizer>) -> Value {
    match n {
        None => Value::Null,
        Some(Normalizer::Bert(b)) => json!({
            "type": "BertNormalizer",
            "clean_text": b.clean_text,
            "handle_chinese_chars": b.handle_chinese_chars,
            "strip_accents": b.strip_accents,
            "lowercase": b.lowercase,
        }),
        Some(n) => hf_components::normalizer_step_json(n, &|step| normalizer_json(Some(step))),
    }
}

fn added_tokens_json(tok: &Tokenizer) -> Vec<Value> {
    tok.added_tokens()
        .iter()
        .map(|t| {
            json!({"id": t.id, "content": t.content, "single_word": false, "lstrip": false, "rstrip": false,
                   "normalized": t.normalized, "special": t.special})
        })
        .collect()
}

/// A whole `tokenizer.json`: HF's top-level fields around the parts each model writes.
fn file_json(tok: &Tokenizer, pre: Value, post: Value, decoder: Value, model: Value) -> Value {
    json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added_tokens_json(tok),
        "normalizer": normalizer_json(tok.normalizer()),
        "pre_tokenizer": pre,
        "post_processor": post,
        "decoder": decoder,
        "model": model,
    })
}

/// HF's `model` object of a BPE tokenizer (byte-level or over characters).
fn bpe_model_json(
    unk_token: Option<String>,
    fuse_unk: bool,
    byte_fallback: bool,
    ignore_merges: bool,
    vocab: Map<String, Value>,
    merges: Vec<Value>,
) -> Value {
    json!({
        "type": "BPE",
        "dropout": null,
        "unk_token": unk_token,
        "continuing_subword_prefix": null,
        "end_of_word_suffix": null,
        "fuse_unk": fuse_unk,
        "byte_fallback": byte_fallback,
        "ignore_merges": ignore_merges,
        "vocab": vocab,
        "merges": merges,
    })
}

/// The `tokenizer.json` text for `tok`.
pub fn to_string(tok: &Tokenizer) -> Result<String> {
    let root = match tok.model() {
        ModelWrapper::Bpe(model) if !model.is_byte_level() => char_bpe_to_json(tok, model)?,
        ModelWrapper::Bpe(model) => bpe_to_json(tok, model),
        ModelWrapper::WordPiece(model) => wordpiece_to_json(tok, model)?,
        ModelWrapper::Unigram(model) => unigram_to_json(tok, model)?,
    };
    serde_json::to_string_pretty(&root)
        .map_err(|e| Error::InvalidArgument(format!("cannot serialise tokenizer: {e}")))
}

fn wordpiece_to_json(tok: &Tokenizer, model: &WordPieceModel) -> Result<Value> {
    if !matches!(tok.pre_tokenizer(), PreTokenizer::Bert) {
        return Err(Error::InvalidArgument(
            "a WordPiece tokenizer.json is only written with the BERT pre-tokenizer".into(),
        ));
    }
    let post = post_processor_json(tok.post_processor());
    let decoder = match tok.decoder() {
        Decoder::WordPiece { prefix, cleanup } => {
            json!({"type": "WordPiece", "prefix": prefix, "cleanup": cleanup})
        }
        _ => Value::Null,
    };
    Ok(file_json(
        tok,
        json!({"type": "BertPreTokenizer"}),
        post,
        decoder,
        hf_wordpiece::to_json(model),
    ))
}

/// `TemplateProcessing` (what HF writes for BERT's `[CLS] $A [SEP]` too), or `null`.
fn post_processor_json(post: Option<&PostProcessor>) -> Value {
    match post {
        None => Value::Null,
        Some(PostProcessor::Template { before, after }) => {
            hf_components::template_json(before, after)
        }
        Some(PostProcessor::Bert { cls, sep }) => {
            hf_components::template_json(std::slice::from_ref(cls), std::slice::from_ref(sep))
        }
    }
}

/// The pre-tokenizer and decoder of a sentencepiece-style tokenizer (Unigram, BPE over
/// characters): a `.model`'s normalizer and decoder as HF's converters spell them, or the HF
/// steps it was read with.
fn spm_style_pre_and_decoder(tok: &Tokenizer, byte_fallback: bool) -> Result<(Value, Value)> {
    Ok(match (tok.normalizer(), tok.decoder()) {
        (Some(Normalizer::SentencePiece(n)), _) => {
            let user_defined: Vec<&str> = tok
                .model()
                .spm_pieces()
                .unwrap_or_default()
                .iter()
                .filter(|p| p.kind == PieceKind::UserDefined)
                .map(|p| p.text.as_str())
                .collect();
            hf_components::spm_pre_tokenizer_and_decoder_json(n, &user_defined, byte_fallback)?
        }
        (_, Decoder::Steps(steps)) => (
            hf_components::pre_tokenizer_json(tok.pre_tokenizer())?,
            hf_components::decode_steps_json(steps),
        ),
        (_, other) => {
            return Err(Error::InvalidArgument(format!(
                "a {} tokenizer with the decoder {other:?} cannot be written as tokenizer.json",
                crate::models::Model::kind(tok.model())
            )))
        }
    })
}

/// BPE over characters. A `.model`'s BPE is written as transformers'
/// `SpmConverter.build_tokenizer_from_spm_proto` writes it: its merges ranked by score, the
/// unknown piece as `unk_token` with `fuse_unk`, `ignore_merges` when it has user-defined
/// pieces (which the pre-tokenizer isolates, so each is one word).
fn char_bpe_to_json(tok: &Tokenizer, model: &BpeModel) -> Result<Value> {
    let post = post_processor_json(tok.post_processor());
    let (pre, decoder) = spm_style_pre_and_decoder(tok, model.byte_fallback())?;
    let text =
        |id: u32| String::from_utf8_lossy(model.token_bytes(id).unwrap_or_default()).into_owned();
    let mut vocab = Map::with_capacity(model.len());
    for (id, t) in model.tokens() {
        vocab.insert(String::from_utf8_lossy(t).into_owned(), json!(id));
    }
    let merges: Vec<Value> = model
        .merge_list()
        .into_iter()
        .map(|(l, r)| json!([text(l), text(r)]))
        .collect();
    let (fuse_unk, ignore_merges) = match model.spm_pieces() {
        Some(pieces) => (
            true,
            pieces.iter().any(|p| p.kind == PieceKind::UserDefined),
        ),
        None => (model.fuse_unk(), model.ignore_merges()),
    };
    let model_json = bpe_model_json(
        model.unk_id().map(text),
        fuse_unk,
        model.byte_fallback(),
        ignore_merges,
        vocab,
        merges,
    );
    Ok(file_json(tok, pre, post, decoder, model_json))
}

fn unigram_to_json(tok: &Tokenizer, model: &UnigramModel) -> Result<Value> {
    let post = post_processor_json(tok.post_processor());
    let (pre, decoder) = spm_style_pre_and_decoder(tok, model.byte_fallback())?;
    Ok(file_json(
        tok,
        pre,
        post,
        decoder,
        hf_unigram::to_json(model),
    ))
}

fn bpe_to_json(tok: &Tokenizer, model: &BpeModel) -> Value {
    let byte_level = |prefix: bool, use_regex: bool| json!({"type": "ByteLevel", "add_prefix_space": prefix, "trim_offsets": true, "use_regex": use_regex});
    let prefix = tok.add_prefix_space();
    // A custom pattern is written as given: HF reads it with Oniguruma, whose syntax differs
    // from fancy-regex's in corners (`{n,m}+` is one), so such a file is worth a parity check.
    let hf_pattern = match tok.pre_tokenizer().preset() {
        Some(preset) => preset.hf_pattern(),
        None => tok.pre_tokenizer().pattern(),
    };
    let pre_tokenizer = match tok.pre_tokenizer().preset() {
        Some(Preset::Gpt2) => byte_level(prefix, true),
        _ => json!({
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": hf_pattern}, "behavior": "Isolated", "invert": false},
                byte_level(prefix, false),
            ]
        }),
    };
    let mut entries: Vec<(u32, String)> = model
        .tokens()
        .map(|(id, b)| (id, byte_level::encode(b)))
        .collect();
    // A special token that shares its id with an ordinary token is already there, spelled the same.
    entries.extend(
        tok.added_tokens()
            .iter()
            .filter(|t| model.token_bytes(t.id).is_none())
            .map(|t| (t.id, t.content.clone())),
    );
    entries.sort_unstable_by_key(|(id, _)| *id);
    let mut vocab = Map::with_capacity(entries.len());
    for (id, text) in entries {
        vocab.insert(text, json!(id));
    }
    let text_of = |id: u32| byte_level::encode(model.token_bytes(id).unwrap_or_default());
    let merge_pairs: Vec<(String, String)> = model
        .merge_list()
        .into_iter()
        .map(|(l, r)| (text_of(l), text_of(r)))
        .collect();
    // Byte-level text never holds a plain space, so the `"left right"` form that every HF
    // version reads is safe; the pair form is kept for the odd vocabulary that needs it.
    let merges: Vec<Value> = if merge_pairs
        .iter()
        .any(|(l, r)| l.contains(' ') || r.contains(' '))
    {
        merge_pairs
            .into_iter()
            .map(|(l, r)| json!([l, r]))
            .collect()
    } else {
        merge_pairs
            .into_iter()
            .map(|(l, r)| Value::String(format!("{l} {r}")))
            .collect()
    };
    // tiktoken ranks return a piece that is a token whole; HF's flag does the same.
    let ignore_merges = model.ignore_merges() || model.rule() == MergeRule::Ranks;
    let model_json = bpe_model_json(None, false, false, ignore_merges, vocab, merges);
    file_json(
        tok,
        pre_tokenizer,
        byte_level(prefix, true),
        byte_level(prefix, true),
        model_json,
    )
}

pub fn save(tok: &Tokenizer, path: &Path) -> Result<()> {
    write_atomic(path, to_string(tok)?.as_bytes())
}
