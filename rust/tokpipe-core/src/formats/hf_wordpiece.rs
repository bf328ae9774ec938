//! The WordPiece `model` object of an HF `tokenizer.json`:
//! `{"type": "WordPiece", "unk_token", "continuing_subword_prefix", "max_input_chars_per_word",
//! "vocab": {token: id}}`. The rest of the file (normalizer, pre-tokenizer, post-processor,
//! decoder, added tokens) is read by [`crate::formats::hf_json`].

use super::hf_components::json_id;
use crate::error::{shown, shown_json, Error, Result};
use crate::models::wordpiece::{WordPieceModel, DEFAULT_MAX_INPUT_CHARS_PER_WORD};
use serde_json::{json, Map, Value};

pub fn from_json(model: &Value, source: &str) -> Result<WordPieceModel> {
    let bad = |msg: String| Error::format(source, msg);
    let string = |field: &str, default: &str| -> Result<String> {
        match model.get(field) {
            None | Some(Value::Null) => Ok(default.to_string()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(other) => Err(bad(format!(
                "model.{field} is not a string: {}",
                shown_json(other)
            ))),
        }
    };
    let unk = string("unk_token", "[UNK]")?;
    let prefix = string("continuing_subword_prefix", "##")?;
    let max_chars = match model.get("max_input_chars_per_word") {
        None | Some(Value::Null) => DEFAULT_MAX_INPUT_CHARS_PER_WORD,
        Some(v) => v.as_u64().ok_or_else(|| {
            bad(format!(
                "model.max_input_chars_per_word is not a count: {}",
                shown_json(v)
            ))
        })? as usize,
    };
    let vocab_obj = model
        .get("vocab")
        .and_then(Value::as_object)
        .ok_or_else(|| bad("model.vocab is not an object".into()))?;
    let mut vocab = Vec::with_capacity(vocab_obj.len());
    for (token, id) in vocab_obj {
        let id = json_id(id).ok_or_else(|| {
            bad(format!(
                "vocab entry {} has the id {}, not an integer from 0 to 2^32 - 2",
                shown(token),
                shown_json(id)
            ))
        })?;
        vocab.push((token.clone(), id));
    }
    WordPieceModel::new(vocab, &unk, &prefix, max_chars, source)
}

pub fn to_json(model: &WordPieceModel) -> Value {
    let mut vocab = Map::with_capacity(model.len());
    for (id, token) in model.tokens() {
        vocab.insert(token.to_string(), json!(id));
    }
    json!({
        "type": "WordPiece",
        "unk_token": model.unk_token(),
        "continuing_subword_prefix": model.continuing_subword_prefix(),
        "max_input_chars_per_word": model.max_input_chars_per_word(),
        "vocab": vocab,
    })
}
