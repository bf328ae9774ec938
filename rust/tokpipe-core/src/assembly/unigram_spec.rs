//! The sentencepiece `.model` a Unigram training run makes, laid out as sentencepiece's trainer
//! writes it, so that the trained tokenizer is loaded through the same code as any `.model` file
//! ([`crate::formats::sentencepiece::tokenizer_from_proto`]): one way to make a sentencepiece
//! tokenizer, not two.
//!
//! - `TrainerSpec`: `model_type` and `vocab_size`, then every option that differs from
//!   sentencepiece's default, in field order; what sentencepiece writes when it is passed those
//!   options. Thread counts are never written (the model is the same for any).
//! - `NormalizerSpec`: the rule's name and precompiled charsmap
//!   ([`crate::normalizers::spm_rules`]), and the whitespace flags that differ from their
//!   defaults. Training normalizes with the normalizer this spec describes
//!   ([`crate::normalizers::spm_rules::trainer_normalizer`]; a test in [`crate::assembly`]
//!   checks that the two agree).
//! - Pieces: meta pieces with score 0 and their type, normal pieces with their score and no
//!   type (NORMAL is the default), as sentencepiece stores them.

use crate::error::Result;
use crate::formats::protobuf::{Field, RawMessage, WireValue};
use crate::formats::sentencepiece::field::{self, trainer as tf};
use crate::formats::sentencepiece::{model_type, ModelProto, ProtoPiece};
use crate::models::pieces::PieceKind;
use crate::models::unigram::trainer::UnigramTrainerConfig;
use crate::normalizers::spm_rules;

/// The `NormalizerSpec` of the config's rule and whitespace options.
pub(crate) fn normalizer_spec(c: &UnigramTrainerConfig) -> Result<RawMessage> {
    let charsmap = spm_rules::precompiled_charsmap(&c.normalization)?;
    let mut spec = RawMessage::default();
    spec.set_bytes(field::NAME, c.normalization.as_bytes());
    spec.set_bytes(field::CHARSMAP, charsmap);
    if !c.add_dummy_prefix {
        spec.set_bool(field::ADD_DUMMY_PREFIX, false);
    }
    if !c.remove_extra_whitespaces {
        spec.set_bool(field::REMOVE_EXTRA_WHITESPACES, false);
    }
    Ok(spec)
}

/// A message written field by field in increasing field number, the order protobuf writes.
#[derive(Default)]
struct Writer(RawMessage);

impl Writer {
    fn push(&mut self, number: u32, value: WireValue) {
        self.0.fields.push(Field { number, value });
    }

    fn int(&mut self, number: u32, value: i64, default: i64) {
        if value != default {
            // int32 is sign-extended to 64 bits on the wire.
            self.push(number, WireValue::Varint(value as u64));
        }
    }

    fn float(&mut self, number: u32, value: f64, default: f64) {
        if value != default {
            self.push(number, WireValue::Fixed32((value as f32).to_bits()));
        }
    }

    fn flag(&mut self, number: u32, value: bool, default: bool) {
        if value != default {
            self.push(number, WireValue::Varint(u64::from(value)));
        }
    }

    fn string(&mut self, number: u32, value: &str, default: Option<&str>) {
        if Some(value) != default {
            self.push(number, WireValue::Bytes(value.as_bytes().to_vec()));
        }
    }
}

/// The `TrainerSpec` of the config (see the module notes).
pub(crate) fn trainer_spec(c: &UnigramTrainerConfig) -> RawMessage {
    // The config's defaults are sentencepiece's, so "differs from ours" is "differs from its".
    let d = UnigramTrainerConfig::default();
    let id = |id: Option<u32>| id.map_or(-1, i64::from);
    let mut w = Writer::default();
    // Always written: no model type or size is -1.
    w.int(field::MODEL_TYPE, model_type::UNIGRAM.into(), -1);
    w.int(field::VOCAB_SIZE, c.vocab_size as i64, -1);
    w.float(
        tf::CHARACTER_COVERAGE,
        c.character_coverage,
        d.character_coverage,
    );
    let size = |v: usize| v as i64;
    w.int(
        tf::SEED_SENTENCEPIECE_SIZE,
        size(c.seed_sentencepiece_size),
        size(d.seed_sentencepiece_size),
    );
    w.float(tf::SHRINKING_FACTOR, c.shrinking_factor, d.shrinking_factor);
    w.int(
        tf::NUM_SUB_ITERATIONS,
        size(c.num_sub_iterations),
        size(d.num_sub_iterations),
    );
    w.int(
        tf::MAX_SENTENCE_LENGTH,
        size(c.max_sentence_length),
        size(d.max_sentence_length),
    );
    w.int(
        tf::MAX_SENTENCEPIECE_LENGTH,
        size(c.max_sentencepiece_length),
        size(d.max_sentencepiece_length),
    );
    w.flag(
        tf::SPLIT_BY_UNICODE_SCRIPT,
        c.split_by_unicode_script,
        d.split_by_unicode_script,
    );
    w.flag(
        tf::SPLIT_BY_WHITESPACE,
        c.split_by_whitespace,
        d.split_by_whitespace,
    );
    w.flag(tf::SPLIT_BY_NUMBER, c.split_by_number, d.split_by_number);
    w.flag(tf::SPLIT_DIGITS, c.split_digits, d.split_digits);
    for s in &c.control_symbols {
        w.string(tf::CONTROL_SYMBOLS, s, None);
    }
    for s in &c.user_defined_symbols {
        w.string(tf::USER_DEFINED_SYMBOLS, s, None);
    }
    w.flag(field::BYTE_FALLBACK, c.byte_fallback, d.byte_fallback);
    w.int(field::UNK_ID, c.unk_id.into(), d.unk_id.into());
    w.int(field::BOS_ID, id(c.bos_id), id(d.bos_id));
    w.int(field::EOS_ID, id(c.eos_id), id(d.eos_id));
    w.int(field::PAD_ID, id(c.pad_id), id(d.pad_id));
    w.string(field::UNK_PIECE, &c.unk_piece, Some(&d.unk_piece));
    w.string(field::BOS_PIECE, &c.bos_piece, Some(&d.bos_piece));
    w.string(field::EOS_PIECE, &c.eos_piece, Some(&d.eos_piece));
    w.string(tf::PAD_PIECE, &c.pad_piece, Some(&d.pad_piece));
    w.0
}

/// The model of the trained `pieces` (`(piece, score, kind)` in id order).
pub(crate) fn model_proto(
    pieces: &[(String, f64, PieceKind)],
    trainer_spec: RawMessage,
    normalizer_spec: RawMessage,
) -> ModelProto {
    let pieces = pieces
        .iter()
        .map(|(piece, score, kind)| {
            let kind = (*kind != PieceKind::Normal).then_some(kind.spm_number());
            ProtoPiece::new(piece.clone(), Some(*score as f32), kind)
        })
        .collect();
    ModelProto::new(pieces, trainer_spec, normalizer_spec)
}
