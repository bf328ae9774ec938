//! sentencepiece's `.model`: a serialized `ModelProto` (pieces with scores and types, the
//! `TrainerSpec` it was trained with, the `NormalizerSpec` with its precompiled charsmap, an
//! optional `denormalizer_spec` and self-test samples).
//!
//! Read into a [`Tokenizer`]: sentencepiece's normalizer ([`SentencePieceNormalizer`]) with the
//! USER_DEFINED pieces passed through, the whole normalized text encoded by the Unigram model
//! with sentencepiece's rules, CONTROL pieces (`<s>`, `</s>`) as special tokens (text unless
//! allowed, as in sentencepiece, where they never come from text), `<s> … </s>` when special
//! tokens are asked for, and sentencepiece's decoder. The ids are sentencepiece's.
//!
//! Written back from such a tokenizer, every field is kept as it was read (unknown ones and
//! extensions included), so a load/save round trip gives the same bytes. A Unigram tokenizer
//! loaded from an HF `tokenizer.json` is written with the pieces' types worked out from its
//! added tokens and the normalizer spec worked out from its HF steps.
//!
//! `model_type: BPE` models read the same way into a character-level BPE model with
//! sentencepiece's rules ([`crate::models::bpe`]), and are written back the same way. WORD and
//! CHAR models are refused with an error that says so.
//!
//! (Over 500 lines: the reader (about 390 lines, with the `ModelProto` both use) and the writer
//! (about 340) of one format, kept together so that a round trip stays byte-exact; most of their
//! tests are in `tests/parity`.)

use super::protobuf::{Field, RawMessage, WireValue};
use super::write_atomic;
use crate::decoders::{SentencePieceDecoder, DEFAULT_UNK_SURFACE};
use crate::error::{shown, Error, Result};
use crate::models::bpe::BpeModel;
use crate::models::pieces::{piece_byte, Piece, PieceKind, Semantics, SpmExtras};
use crate::models::unigram::UnigramModel;
use crate::models::{Model, ModelWrapper};
use crate::normalizers::replace::ReplacePattern;
use crate::normalizers::{CharsMap, Normalizer, SentencePieceNormalizer};
use crate::pre_tokenizers::{PreTokenizer, PrependScheme};
use crate::tokenizer::{AddedToken, Decoder, PostProcessor, Tokenizer};
use std::path::Path;
use std::sync::Arc;

/// `TrainerSpec.ModelType`.
pub mod model_type {
    pub const UNIGRAM: i32 = 1;
    pub const BPE: i32 = 2;
    pub const WORD: i32 = 3;
    pub const CHAR: i32 = 4;
}

/// Field numbers of the messages in `sentencepiece_model.proto`.
pub(crate) mod field {
    pub const PIECES: u32 = 1;
    pub const TRAINER_SPEC: u32 = 2;
    pub const NORMALIZER_SPEC: u32 = 3;
    pub const SELF_TEST_DATA: u32 = 4;
    pub const DENORMALIZER_SPEC: u32 = 5;

    pub const PIECE: u32 = 1;
    pub const SCORE: u32 = 2;
    pub const TYPE: u32 = 3;

    pub const MODEL_TYPE: u32 = 3;
    pub const VOCAB_SIZE: u32 = 4;
    pub const TREAT_WHITESPACE_AS_SUFFIX: u32 = 24;
    pub const BYTE_FALLBACK: u32 = 35;
    pub const UNK_ID: u32 = 40;
    pub const BOS_ID: u32 = 41;
    pub const EOS_ID: u32 = 42;
    pub const PAD_ID: u32 = 43;
    pub const UNK_SURFACE: u32 = 44;
    pub const UNK_PIECE: u32 = 45;
    pub const BOS_PIECE: u32 = 46;
    pub const EOS_PIECE: u32 = 47;

    pub const NAME: u32 = 1;
    pub const CHARSMAP: u32 = 2;
    pub const ADD_DUMMY_PREFIX: u32 = 3;
    pub const REMOVE_EXTRA_WHITESPACES: u32 = 4;
    pub const ESCAPE_WHITESPACES: u32 = 5;

    /// `TrainerSpec` options only a Unigram training run writes (`assembly::unigram_spec`).
    pub mod trainer {
        pub const CHARACTER_COVERAGE: u32 = 10;
        pub const SEED_SENTENCEPIECE_SIZE: u32 = 14;
        pub const SHRINKING_FACTOR: u32 = 15;
        pub const NUM_SUB_ITERATIONS: u32 = 17;
        pub const MAX_SENTENCE_LENGTH: u32 = 18;
        pub const MAX_SENTENCEPIECE_LENGTH: u32 = 20;
        pub const SPLIT_BY_UNICODE_SCRIPT: u32 = 21;
        pub const SPLIT_BY_WHITESPACE: u32 = 22;
        pub const SPLIT_BY_NUMBER: u32 = 23;
        pub const SPLIT_DIGITS: u32 = 25;
        pub const CONTROL_SYMBOLS: u32 = 30;
        pub const USER_DEFINED_SYMBOLS: u32 = 31;
        pub const PAD_PIECE: u32 = 48;
    }
}

/// One `ModelProto.SentencePiece` as stored: proto2 tells an absent score or type from a
/// default one, and a round trip keeps the difference.
#[derive(Clone, Debug, PartialEq)]
pub struct ProtoPiece {
    pub piece: String,
    pub score: Option<f32>,
    pub kind: Option<i32>,
    unknown: Vec<Field>,
}

impl ProtoPiece {
    pub fn new(piece: String, score: Option<f32>, kind: Option<i32>) -> Self {
        ProtoPiece {
            piece,
            score,
            kind,
            unknown: Vec::new(),
        }
    }
}

/// A parsed `.model`. The specs stay field lists, read through the accessors below.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelProto {
    pub pieces: Vec<ProtoPiece>,
    trainer_spec: RawMessage,
    normalizer_spec: Option<RawMessage>,
    self_test_data: Option<Vec<u8>>,
    denormalizer_spec: Option<RawMessage>,
    unknown: Vec<Field>,
}

impl ModelProto {
    /// A model of these pieces and specs, as a trainer writes it (no self-test data, no
    /// denormalizer).
    pub(crate) fn new(
        pieces: Vec<ProtoPiece>,
        trainer_spec: RawMessage,
        normalizer_spec: RawMessage,
    ) -> Self {
        ModelProto {
            pieces,
            trainer_spec,
            normalizer_spec: Some(normalizer_spec),
            self_test_data: None,
            denormalizer_spec: None,
            unknown: Vec::new(),
        }
    }

    /// Parses a serialized `ModelProto`; `source` names the file in errors.
    pub fn parse(bytes: &[u8], source: &str) -> Result<Self> {
        let bad = |msg: String| Error::format(source, format!("not a sentencepiece model: {msg}"));
        let top = RawMessage::parse(bytes).map_err(bad)?;
        let mut proto = ModelProto {
            pieces: Vec::new(),
            trainer_spec: RawMessage::default(),
            normalizer_spec: None,
            self_test_data: None,
            denormalizer_spec: None,
            unknown: Vec::new(),
        };
        let message = |f: &Field| match &f.value {
            WireValue::Bytes(b) => RawMessage::parse(b).map_err(|e| {
                Error::format(source, format!("field {} is not a message: {e}", f.number))
            }),
            _ => Err(Error::format(
                source,
                format!("field {} is not a message", f.number),
            )),
        };
        // A message field given twice is merged, as protobuf does: its fields appended.
        let merge = |into: &mut Option<RawMessage>, m: RawMessage| match into {
            Some(old) => old.fields.extend(m.fields),
            None => *into = Some(m),
        };
        let mut trainer: Option<RawMessage> = None;
        for f in &top.fields {
            match f.number {
                field::PIECES => {
                    let m = message(f)?;
                    let n = proto.pieces.len();
                    let e = |msg: String| Error::format(source, format!("piece {n}: {msg}"));
                    let piece = m.string(field::PIECE).map_err(e)?.unwrap_or("").to_string();
                    let score = m.float(field::SCORE).map_err(e)?;
                    let kind = m.varint(field::TYPE).map_err(e)?.map(|v| v as i32);
                    let unknown = m
                        .fields
                        .into_iter()
                        .filter(|f| ![field::PIECE, field::SCORE, field::TYPE].contains(&f.number))
                        .collect();
                    proto.pieces.push(ProtoPiece {
                        piece,
                        score,
                        kind,
                        unknown,
                    });
                }
                field::TRAINER_SPEC => merge(&mut trainer, message(f)?),
                field::NORMALIZER_SPEC => merge(&mut proto.normalizer_spec, message(f)?),
                field::DENORMALIZER_SPEC => merge(&mut proto.denormalizer_spec, message(f)?),
                field::SELF_TEST_DATA => match &f.value {
                    WireValue::Bytes(b) => {
                        proto.self_test_data.get_or_insert_with(Vec::new).extend(b)
                    }
                    _ => return Err(bad("self_test_data is not a message".into())),
                },
                _ => proto.unknown.push(f.clone()),
            }
        }
        proto.trainer_spec = trainer.unwrap_or_default();
        if proto.pieces.is_empty() {
            return Err(bad("it has no pieces".into()));
        }
        Ok(proto)
    }

    /// The serialized model, fields in the order protobuf writes them.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for p in &self.pieces {
            let mut m = RawMessage::default();
            m.fields.push(Field {
                number: field::PIECE,
                value: WireValue::Bytes(p.piece.as_bytes().to_vec()),
            });
            if let Some(score) = p.score {
                m.fields.push(Field {
                    number: field::SCORE,
                    value: WireValue::Fixed32(score.to_bits()),
                });
            }
            if let Some(kind) = p.kind {
                m.fields.push(Field {
                    number: field::TYPE,
                    value: WireValue::Varint(kind as i64 as u64),
                });
            }
            m.fields.extend(p.unknown.iter().cloned());
            super::protobuf::write_field(&mut out, field::PIECES, &WireValue::Bytes(m.to_bytes()));
        }
        let mut put = |n: u32, bytes: Vec<u8>| {
            super::protobuf::write_field(&mut out, n, &WireValue::Bytes(bytes));
        };
        put(field::TRAINER_SPEC, self.trainer_spec.to_bytes());
        if let Some(spec) = &self.normalizer_spec {
            put(field::NORMALIZER_SPEC, spec.to_bytes());
        }
        if let Some(data) = &self.self_test_data {
            put(field::SELF_TEST_DATA, data.clone());
        }
        if let Some(spec) = &self.denormalizer_spec {
            put(field::DENORMALIZER_SPEC, spec.to_bytes());
        }
        RawMessage {
            fields: self.unknown.clone(),
        }
        .write(&mut out);
        out
    }

    /// `TrainerSpec.model_type` (UNIGRAM when unset).
    pub fn model_type(&self) -> Result<i32> {
        self.trainer_spec
            .int32(field::MODEL_TYPE, model_type::UNIGRAM)
            .map_err(|e| Error::format("<model>", format!("trainer_spec: {e}")))
    }
}

/// Whether `bytes` look like a serialized `ModelProto` rather than JSON: it starts with a
/// `pieces` entry (field 1, length-delimited), as every model sentencepiece writes does.
pub fn looks_like_model(bytes: &[u8]) -> bool {
    bytes.first() == Some(&0x0a)
}

pub fn load(path: &Path) -> Result<Tokenizer> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    from_bytes(&bytes, &path.display().to_string())
}

pub fn from_bytes(bytes: &[u8], source: &str) -> Result<Tokenizer> {
    tokenizer_from_proto(&ModelProto::parse(bytes, source)?, source)
}

/// The normalizer of a `NormalizerSpec` (absent: the proto defaults, no charsmap).
pub(crate) fn spm_normalizer(
    spec: Option<&RawMessage>,
    treat_whitespace_as_suffix: bool,
    source: &str,
) -> Result<SentencePieceNormalizer> {
    let bad = |msg: String| Error::format(source, format!("normalizer spec: {msg}"));
    let empty = RawMessage::default();
    let spec_or_empty = spec.unwrap_or(&empty);
    let charsmap = match spec_or_empty.bytes(field::CHARSMAP).map_err(bad)? {
        Some(b) if !b.is_empty() => Some(CharsMap::from_bytes(b).map_err(bad)?),
        _ => None,
    };
    let mut n = SentencePieceNormalizer::new(
        spec_or_empty
            .string(field::NAME)
            .map_err(bad)?
            .unwrap_or_default(),
        charsmap,
        spec_or_empty
            .bool(field::ADD_DUMMY_PREFIX, true)
            .map_err(bad)?,
        spec_or_empty
            .bool(field::REMOVE_EXTRA_WHITESPACES, true)
            .map_err(bad)?,
        spec_or_empty
            .bool(field::ESCAPE_WHITESPACES, true)
            .map_err(bad)?,
        treat_whitespace_as_suffix,
    );
    n.spec = spec.map(RawMessage::to_bytes);
    Ok(n)
}

/// The tokenizer a `.model` describes (see the module notes).
pub fn tokenizer_from_proto(proto: &ModelProto, source: &str) -> Result<Tokenizer> {
    let bad = |msg: String| Error::format(source, msg);
    let trainer = &proto.trainer_spec;
    let spec_err = |e: String| bad(format!("trainer spec: {e}"));
    let kind = proto.model_type()?;
    match kind {
        model_type::UNIGRAM | model_type::BPE => {}
        t => {
            return Err(bad(format!(
                "sentencepiece model_type {t} ({}) is not supported; Unigram and BPE models are",
                match t {
                    model_type::WORD => "WORD",
                    model_type::CHAR => "CHAR",
                    _ => "unknown",
                }
            )))
        }
    }
    let mut pieces = Vec::with_capacity(proto.pieces.len());
    for (i, p) in proto.pieces.iter().enumerate() {
        let kind_number = p.kind.unwrap_or(1);
        let kind = PieceKind::from_spm(kind_number).ok_or_else(|| {
            bad(format!(
                "piece {i} {} has unknown type {kind_number}",
                shown(&p.piece)
            ))
        })?;
        pieces.push(Piece::new(
            &p.piece,
            f64::from(p.score.unwrap_or(0.0)),
            kind,
        ));
    }
    let byte_fallback = trainer
        .bool(field::BYTE_FALLBACK, false)
        .map_err(spec_err)?;
    let extras = Arc::new(SpmExtras {
        trainer_spec: trainer.to_bytes(),
        self_test_data: proto.self_test_data.clone(),
        unknown: RawMessage {
            fields: proto.unknown.clone(),
        }
        .to_bytes(),
        piece_unknown: proto
            .pieces
            .iter()
            .enumerate()
            .filter(|(_, p)| !p.unknown.is_empty())
            .map(|(i, p)| {
                (
                    i as u32,
                    RawMessage {
                        fields: p.unknown.clone(),
                    }
                    .to_bytes(),
                )
            })
            .collect(),
        piece_presence: proto
            .pieces
            .iter()
            .map(|p| (p.score.is_some(), p.kind.is_some()))
            .collect(),
    });
    let model: ModelWrapper = if kind == model_type::BPE {
        let mut model = BpeModel::from_sentencepiece(pieces, byte_fallback, source)?;
        model.set_spm_extras(extras);
        model.into()
    } else {
        let mut model = UnigramModel::new(
            pieces,
            None,
            byte_fallback,
            Semantics::SentencePiece,
            source,
        )?;
        model.spm_extras = Some(extras);
        model.into()
    };
    let model_pieces = model.spm_pieces().unwrap_or_default();

    let suffix = trainer
        .bool(field::TREAT_WHITESPACE_AS_SUFFIX, false)
        .map_err(spec_err)?;
    let normalizer = spm_normalizer(proto.normalizer_spec.as_ref(), suffix, source)?
        .with_user_defined(
            model_pieces
                .iter()
                .filter(|p| p.kind == PieceKind::UserDefined)
                .map(|p| p.text.as_str()),
        );
    let denormalizer = match &proto.denormalizer_spec {
        Some(spec)
            if spec
                .bytes(field::CHARSMAP)
                .map_err(|e| bad(format!("denormalizer spec: {e}")))?
                .is_some_and(|b| !b.is_empty()) =>
        {
            Some(Arc::new(spm_normalizer(Some(spec), false, source)?))
        }
        _ => None,
    };
    let decoder = SentencePieceDecoder {
        unk_surface: trainer
            .string(field::UNK_SURFACE)
            .map_err(spec_err)?
            .unwrap_or(DEFAULT_UNK_SURFACE)
            .to_string(),
        add_dummy_prefix: normalizer.add_dummy_prefix(),
        remove_extra_whitespaces: normalizer.remove_extra_whitespaces(),
        denormalizer,
        denormalizer_spec: proto.denormalizer_spec.as_ref().map(RawMessage::to_bytes),
    };
    spm_tokenizer(model, normalizer, decoder)
}

/// The tokenizer around a sentencepiece-semantics model (Unigram or BPE): control pieces as
/// special tokens, `<s> … </s>` on request (from the pieces sentencepiece's `bos_id()` /
/// `eos_id()` find).
pub fn spm_tokenizer(
    model: impl Into<ModelWrapper>,
    normalizer: SentencePieceNormalizer,
    decoder: SentencePieceDecoder,
) -> Result<Tokenizer> {
    let model: ModelWrapper = model.into();
    let specials: Vec<AddedToken> = model
        .spm_pieces()
        .unwrap_or_default()
        .iter()
        .enumerate()
        .filter(|(_, p)| p.kind == PieceKind::Control)
        .map(|(id, p)| AddedToken::special(p.text.clone(), id as u32))
        .collect();
    let (bos, eos) = spm_bos_eos(&model);
    let post = (bos.is_some() || eos.is_some()).then(|| PostProcessor::Template {
        before: bos.into_iter().collect(),
        after: eos.into_iter().collect(),
    });
    Ok(Tokenizer::new(PreTokenizer::Whole, model, specials)?
        .with_normalizer(Some(Normalizer::SentencePiece(Arc::new(normalizer))))
        .with_post_processor(post)
        .with_decoder(Decoder::SentencePiece(Arc::new(decoder))))
}

/// A piece and its id.
type NamedId = (String, u32);

/// sentencepiece's `bos_id()` and `eos_id()`: the piece named by `bos_piece` / `eos_piece`
/// (`<s>`, `</s>` by default) when it is a CONTROL piece.
fn spm_bos_eos(model: &ModelWrapper) -> (Option<NamedId>, Option<NamedId>) {
    let named = |n: u32, default: &str| -> String {
        model
            .spm_extras()
            .and_then(|e| RawMessage::parse(&e.trainer_spec).ok())
            .and_then(|t| t.string(n).ok().flatten().map(str::to_string))
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| default.to_string())
    };
    let control = |name: String| {
        let id = model.token_to_id(&name)?;
        let kind = model.spm_pieces()?.get(id as usize)?.kind;
        (kind == PieceKind::Control).then_some((name, id))
    };
    (
        control(named(field::BOS_PIECE, "<s>")),
        control(named(field::EOS_PIECE, "</s>")),
    )
}

// -- writing ----------------------------------------------------------------------------------

fn set_if_changed(m: &mut RawMessage, n: u32, value: WireValue, default: Option<&WireValue>) {
    let current = m.last(n).or(default);
    if current != Some(&value) {
        m.set(n, value);
    }
}

fn varint_bool(v: bool) -> WireValue {
    WireValue::Varint(u64::from(v))
}

/// The `NormalizerSpec` of a sentencepiece normalizer: the spec it was read from, with the
/// fields it uses set to its values.
fn normalizer_spec(n: &SentencePieceNormalizer) -> RawMessage {
    let mut spec = n
        .spec
        .as_deref()
        .and_then(|b| RawMessage::parse(b).ok())
        .unwrap_or_default();
    let fresh = n.spec.is_none();
    let t = varint_bool(true);
    if fresh || spec.has(field::NAME) || !n.name().is_empty() {
        set_if_changed(
            &mut spec,
            field::NAME,
            WireValue::Bytes(n.name().as_bytes().to_vec()),
            None,
        );
    }
    let charsmap = n.charsmap().map(|c| c.blob().to_vec()).unwrap_or_default();
    if fresh || spec.has(field::CHARSMAP) || !charsmap.is_empty() {
        set_if_changed(&mut spec, field::CHARSMAP, WireValue::Bytes(charsmap), None);
    }
    let flags = [
        (field::ADD_DUMMY_PREFIX, n.add_dummy_prefix()),
        (
            field::REMOVE_EXTRA_WHITESPACES,
            n.remove_extra_whitespaces(),
        ),
        (field::ESCAPE_WHITESPACES, n.escape_whitespaces()),
    ];
    for (f, v) in flags {
        if fresh {
            spec.set_bool(f, v);
        } else {
            set_if_changed(&mut spec, f, varint_bool(v), Some(&t));
        }
    }
    spec
}

/// The `.model` of a Unigram tokenizer (see the module notes).
pub fn proto_from_tokenizer(tok: &Tokenizer) -> Result<ModelProto> {
    let refuse = |why: &str| {
        Error::InvalidArgument(format!(
            "this tokenizer cannot be written as a sentencepiece .model: {why}"
        ))
    };
    let model = spm_view(tok.model()).map_err(|why| refuse(&why))?;
    let extras = model.extras;

    // Piece types: the model's own for a .model; for an HF file, from its added tokens.
    let mut kinds: Vec<PieceKind> = model.pieces.iter().map(|p| p.kind).collect();
    if model.semantics == Semantics::HuggingFace {
        for t in tok.added_tokens() {
            if let Some(k) = kinds.get_mut(t.id as usize) {
                if model.pieces[t.id as usize].text == t.content && *k == PieceKind::Normal {
                    *k = if t.special {
                        PieceKind::Control
                    } else {
                        PieceKind::UserDefined
                    };
                }
            }
        }
        if model.byte_fallback {
            for (k, p) in kinds.iter_mut().zip(model.pieces.iter()) {
                if *k == PieceKind::Normal && piece_byte(&p.text).is_some() {
                    *k = PieceKind::Byte;
                }
            }
        }
    }
    let presence = extras.map(|e| &e.piece_presence);
    let mut pieces = Vec::with_capacity(model.pieces.len());
    for (id, (p, &kind)) in model.pieces.iter().zip(&kinds).enumerate() {
        let (has_score, has_type) = presence.and_then(|v| v.get(id).copied()).unwrap_or((
            p.score != 0.0 || kind == PieceKind::Normal,
            kind != PieceKind::Normal,
        ));
        let unknown = extras
            .and_then(|e| e.piece_unknown.iter().find(|(i, _)| *i as usize == id))
            .map(|(_, b)| RawMessage::parse(b).map(|m| m.fields).unwrap_or_default())
            .unwrap_or_default();
        pieces.push(ProtoPiece {
            piece: p.text.clone(),
            score: (has_score || p.score != 0.0).then_some(p.score as f32),
            kind: (has_type || kind != PieceKind::Normal).then_some(kind.spm_number()),
            unknown,
        });
    }

    // Normalizer and decoder: sentencepiece's own, or worked out from HF's steps.
    let (normalizer, decoder) = match (tok.normalizer(), tok.decoder()) {
        (Some(Normalizer::SentencePiece(n)), Decoder::SentencePiece(d)) => {
            ((**n).clone(), Some((**d).clone()))
        }
        (Some(Normalizer::SentencePiece(n)), _) => ((**n).clone(), None),
        (hf, _) => (
            normalizer_from_hf(hf, tok.pre_tokenizer()).map_err(|w| refuse(&w))?,
            None,
        ),
    };
    let mut trainer = extras
        .and_then(|e| RawMessage::parse(&e.trainer_spec).ok())
        .unwrap_or_default();
    let fresh = extras.is_none();
    let id_of = |kind: PieceKind, name: &str| {
        kinds
            .iter()
            .zip(model.pieces.iter())
            .position(|(&k, p)| k == kind && p.text == name)
            .map_or(-1, |i| i as i32)
    };
    if fresh {
        trainer.set_int32(field::MODEL_TYPE, model.model_type);
        trainer.set_int32(field::VOCAB_SIZE, model.pieces.len() as i32);
        trainer.set_int32(field::UNK_ID, model.unk_id.map_or(-1, |u| u as i32));
        trainer.set_int32(field::BOS_ID, id_of(PieceKind::Control, "<s>"));
        trainer.set_int32(field::EOS_ID, id_of(PieceKind::Control, "</s>"));
        trainer.set_int32(field::PAD_ID, id_of(PieceKind::Control, "<pad>"));
        if let Some(unk) = model.unk_id {
            trainer.set_bytes(field::UNK_PIECE, model.pieces[unk as usize].text.as_bytes());
        }
    }
    set_if_changed(
        &mut trainer,
        field::BYTE_FALLBACK,
        varint_bool(model.byte_fallback),
        Some(&varint_bool(false)),
    );
    set_if_changed(
        &mut trainer,
        field::TREAT_WHITESPACE_AS_SUFFIX,
        varint_bool(normalizer.treat_whitespace_as_suffix()),
        Some(&varint_bool(false)),
    );
    if let Some(d) = &decoder {
        let default = WireValue::Bytes(DEFAULT_UNK_SURFACE.as_bytes().to_vec());
        set_if_changed(
            &mut trainer,
            field::UNK_SURFACE,
            WireValue::Bytes(d.unk_surface.as_bytes().to_vec()),
            Some(&default),
        );
    }
    let denormalizer_spec = decoder.as_ref().and_then(|d| {
        d.denormalizer_spec
            .as_deref()
            .and_then(|b| RawMessage::parse(b).ok())
            .or_else(|| d.denormalizer.as_deref().map(normalizer_spec))
    });
    Ok(ModelProto {
        pieces,
        trainer_spec: trainer,
        normalizer_spec: Some(normalizer_spec(&normalizer)),
        self_test_data: extras.and_then(|e| e.self_test_data.clone()),
        denormalizer_spec,
        unknown: extras
            .and_then(|e| RawMessage::parse(&e.unknown).ok())
            .map(|m| m.fields)
            .unwrap_or_default(),
    })
}

/// What the writer needs of a model: its pieces in id order, whose rules they follow, and the
/// `model_type` to write.
struct SpmView<'a> {
    pieces: std::borrow::Cow<'a, [Piece]>,
    semantics: Semantics,
    unk_id: Option<u32>,
    byte_fallback: bool,
    model_type: i32,
    extras: Option<&'a SpmExtras>,
}

/// The [`SpmView`] of a Unigram model, or of a character-level BPE model. The pieces of a BPE
/// model read from an HF file score by their merge's rank (the first merge that makes a piece
/// ranks it; pieces no merge makes score below every merge), so sentencepiece's highest score
/// first is HF's lowest rank first; the unknown token is the UNKNOWN piece.
fn spm_view(model: &ModelWrapper) -> std::result::Result<SpmView<'_>, String> {
    match model {
        ModelWrapper::Unigram(m) => Ok(SpmView {
            pieces: std::borrow::Cow::Borrowed(m.pieces()),
            semantics: m.semantics(),
            unk_id: m.unk_id(),
            byte_fallback: m.byte_fallback(),
            model_type: model_type::UNIGRAM,
            extras: m.spm_extras.as_deref(),
        }),
        ModelWrapper::Bpe(m) if !m.is_byte_level() => {
            // HF's byte fallback finds byte tokens one by one; sentencepiece's needs all 256
            // (Llama's converter sets the flag whether the model has them or not).
            let all_bytes = m.knows_every_byte();
            let common = |pieces, semantics| SpmView {
                pieces,
                semantics,
                unk_id: m.unk_id(),
                byte_fallback: m.byte_fallback() && all_bytes,
                model_type: model_type::BPE,
                extras: m.spm_extras(),
            };
            if let Some(pieces) = m.spm_pieces() {
                return Ok(common(
                    std::borrow::Cow::Borrowed(pieces),
                    Semantics::SentencePiece,
                ));
            }
            let n = m.id_bound();
            if m.len() != n {
                return Err("its token ids have holes".into());
            }
            let merges = m.merge_list();
            let mut first_rank: Vec<Option<usize>> = vec![None; n];
            for (rank, &(l, r)) in merges.iter().enumerate() {
                let joined = [
                    m.token_bytes(l).unwrap_or_default(),
                    m.token_bytes(r).unwrap_or_default(),
                ]
                .concat();
                if let Some(id) = m.token_id(&joined) {
                    first_rank[id as usize].get_or_insert(rank);
                }
            }
            let pieces = m
                .tokens()
                .map(|(id, bytes)| {
                    let text = String::from_utf8_lossy(bytes).into_owned();
                    let score =
                        -(first_rank[id as usize].unwrap_or(merges.len() + id as usize) as f64);
                    let kind = if Some(id) == m.unk_id() {
                        PieceKind::Unknown
                    } else {
                        PieceKind::Normal
                    };
                    Piece::new(text, score, kind)
                })
                .collect();
            Ok(common(
                std::borrow::Cow::Owned(pieces),
                Semantics::HuggingFace,
            ))
        }
        other => Err(format!(
            "its model is {}{}, not Unigram or sentencepiece-style BPE",
            if other.as_bpe().is_some() {
                "byte-level "
            } else {
                ""
            },
            Model::kind(other)
        )),
    }
}

/// sentencepiece's normalizer equivalent to an HF normalizer and pre-tokenizer as HF's
/// converters write them: the charsmap of a `Precompiled` step, whitespace collapsing from a
/// `Replace` of runs of spaces, the dummy prefix from `Metaspace` (or `Prepend("▁")`).
fn normalizer_from_hf(
    normalizer: Option<&Normalizer>,
    pre: &PreTokenizer,
) -> std::result::Result<SentencePieceNormalizer, String> {
    let mut charsmap = None;
    let mut remove_extra = false;
    let mut dummy = false;
    let mut steps: Vec<&Normalizer> = Vec::new();
    fn flatten<'a>(n: &'a Normalizer, out: &mut Vec<&'a Normalizer>) {
        match n {
            Normalizer::Sequence(s) => s.iter().for_each(|n| flatten(n, out)),
            n => out.push(n),
        }
    }
    if let Some(n) = normalizer {
        flatten(n, &mut steps);
    }
    for step in steps {
        match step {
            Normalizer::Precompiled(map) => charsmap = Some((**map).clone()),
            Normalizer::Replace(r) => match (r.pattern(), r.content()) {
                (ReplacePattern::Regex(p), _) if p == " {2,}" => remove_extra = true,
                (ReplacePattern::Regex(p), "") if p == r"\A +| +\z" => remove_extra = true,
                (ReplacePattern::String(p), "▁") if p == " " => {}
                (ReplacePattern::Regex(p), "▁▁") if p == r"\A▁" => {}
                _ => return Err(format!("its normalizer replaces {:?}", r.pattern())),
            },
            Normalizer::Strip {
                left: false,
                right: true,
            } => remove_extra = true,
            Normalizer::Prepend(p) if &**p == "▁" => dummy = true,
            other => return Err(format!("its normalizer has a {} step", other.hf_type())),
        }
    }
    let mut pres = vec![pre];
    if let PreTokenizer::Sequence(s) = pre {
        pres = s.iter().collect();
    }
    for p in pres {
        match p {
            PreTokenizer::Metaspace(m) => {
                if m.replacement != '▁' {
                    return Err("its Metaspace replacement is not ▁".into());
                }
                dummy |= m.prepend_scheme != PrependScheme::Never;
            }
            PreTokenizer::Whole | PreTokenizer::SplitIsolated { .. } => {}
            other => return Err(format!("its pre-tokenizer is {:?}", other.pattern())),
        }
    }
    let name = if charsmap.is_some() { "" } else { "identity" };
    Ok(SentencePieceNormalizer::new(
        name,
        charsmap,
        dummy,
        remove_extra,
        true,
        false,
    ))
}

pub fn to_vec(tok: &Tokenizer) -> Result<Vec<u8>> {
    Ok(proto_from_tokenizer(tok)?.to_bytes())
}

pub fn save(tok: &Tokenizer, path: &Path) -> Result<()> {
    write_atomic(path, &to_vec(tok)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_a_format_error_naming_the_file() {
        for bad in [&b""[..], b"{\"model\": 1}", b"\x0a\x05ab", b"\x12\x00"] {
            let err = from_bytes(bad, "x.model").unwrap_err().to_string();
            assert!(err.starts_with("x.model:"), "{err}");
        }
    }
}
