//! sentencepiece's normalizer, as `SentencePieceProcessor::Encode` runs it before the model:
//! the precompiled charsmap ([`super::precompiled`]) applied longest-prefix first, then the
//! whitespace rules of the model's `NormalizerSpec`:
//! - `remove_extra_whitespaces`: leading and trailing spaces dropped, runs of spaces collapsed
//!   (a space is whatever the charsmap turns into `" "`: tabs and newlines under `nmt_nfkc`);
//! - `add_dummy_prefix`: one space put before the text (after it with the trainer's
//!   `treat_whitespace_as_suffix`), so a word is spelled the same at the start of a text as
//!   after a space;
//! - `escape_whitespaces`: spaces written as U+2581 `▁`.
//!
//! User-defined symbols are copied through unnormalized (sentencepiece matches the longest one
//! at each position before looking at the charsmap), so the model can match them whole.

use super::precompiled::{CharRule, CharsMap};
use aho_corasick::{AhoCorasick, Anchored, Input, MatchKind, StartKind};

/// U+2581, what spaces become.
pub const SPACE_SYMBOL: &str = "\u{2581}";

#[derive(Clone, Debug)]
pub struct SentencePieceNormalizer {
    name: String,
    charsmap: Option<CharsMap>,
    add_dummy_prefix: bool,
    remove_extra_whitespaces: bool,
    escape_whitespaces: bool,
    treat_whitespace_as_suffix: bool,
    user_defined: Option<UserDefined>,
    /// For each ASCII byte that starts no user-defined symbol, what it normalizes to alone
    /// (itself, or its one-byte rule's replacement) ...
    ascii: Vec<Option<Box<str>>>,
    /// ... which is the longest match unless the next byte is in its set here (it continues a
    /// longer rule).
    ascii_next: Vec<[u64; 4]>,
    /// ASCII bytes other than the space that normalize to themselves (see `ascii`).
    ascii_self: [bool; 128],
    /// Of those, the ones no ASCII byte continues a rule after (every letter under
    /// `nmt_nfkc`): a run of them needs no look at the next byte but at its end. 256 entries,
    /// false for non-ASCII bytes.
    run_byte: [bool; 256],
    /// The `NormalizerSpec` this came from, serialized, so fields it does not use (a rule TSV,
    /// extensions) are written back.
    pub(crate) spec: Option<Vec<u8>>,
}

/// The longest user-defined symbol at a position (sentencepiece's `PrefixMatcher`), which
/// both its normalizer and its BPE model ask.
#[derive(Clone, Debug)]
pub(crate) struct UserDefined {
    matcher: AhoCorasick,
    /// Bytes a symbol starts with: elsewhere the matcher is not asked.
    first_bytes: [bool; 256],
}

impl UserDefined {
    /// `None` without symbols (empty ones are left out).
    pub(crate) fn new<'a>(symbols: impl IntoIterator<Item = &'a str>) -> Option<Self> {
        let symbols: Vec<&str> = symbols.into_iter().filter(|s| !s.is_empty()).collect();
        if symbols.is_empty() {
            return None;
        }
        let mut first_bytes = [false; 256];
        for s in &symbols {
            first_bytes[s.as_bytes()[0] as usize] = true;
        }
        Some(UserDefined {
            matcher: AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostLongest)
                .start_kind(StartKind::Anchored)
                .build(&symbols)
                .expect("a few literal strings always build"),
            first_bytes,
        })
    }

    /// Whether some symbol starts with this byte.
    #[inline(always)]
    pub(crate) fn may_start(&self, byte: u8) -> bool {
        self.first_bytes[byte as usize]
    }

    /// The longest symbol `text` starts with: its length and its index among the symbols
    /// given to [`UserDefined::new`] (empty ones not counted).
    #[inline]
    pub(crate) fn longest_prefix(&self, text: &str) -> Option<(usize, usize)> {
        if !self.may_start(*text.as_bytes().first()?) {
            return None;
        }
        self.matcher
            .find(Input::new(text).anchored(Anchored::Yes))
            .map(|m| (m.end(), m.pattern().as_usize()))
    }
}

impl SentencePieceNormalizer {
    pub fn new(
        name: impl Into<String>,
        charsmap: Option<CharsMap>,
        add_dummy_prefix: bool,
        remove_extra_whitespaces: bool,
        escape_whitespaces: bool,
        treat_whitespace_as_suffix: bool,
    ) -> Self {
        let mut n = SentencePieceNormalizer {
            name: name.into(),
            charsmap,
            add_dummy_prefix,
            remove_extra_whitespaces,
            escape_whitespaces,
            treat_whitespace_as_suffix,
            user_defined: None,
            ascii: Vec::new(),
            ascii_next: Vec::new(),
            ascii_self: [false; 128],
            run_byte: [false; 256],
            spec: None,
        };
        n.refresh_tables();
        n
    }

    /// The rule set's name (`nmt_nfkc`, `identity`, ...), kept for writing the model back.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn charsmap(&self) -> Option<&CharsMap> {
        self.charsmap.as_ref()
    }

    pub fn add_dummy_prefix(&self) -> bool {
        self.add_dummy_prefix
    }

    pub fn remove_extra_whitespaces(&self) -> bool {
        self.remove_extra_whitespaces
    }

    pub fn escape_whitespaces(&self) -> bool {
        self.escape_whitespaces
    }

    pub fn treat_whitespace_as_suffix(&self) -> bool {
        self.treat_whitespace_as_suffix
    }

    /// Sets the user-defined symbols copied through unnormalized (the model's USER_DEFINED
    /// pieces).
    pub fn with_user_defined<'a>(mut self, symbols: impl IntoIterator<Item = &'a str>) -> Self {
        self.user_defined = UserDefined::new(symbols);
        self.refresh_tables();
        self
    }

    /// The space as written in normalized text.
    fn space(&self) -> &'static str {
        if self.escape_whitespaces {
            SPACE_SYMBOL
        } else {
            " "
        }
    }

    /// sentencepiece's `NormalizePrefix`: what the text at `rest` becomes, and how many bytes
    /// of it that covers.
    #[inline]
    fn prefix<'a>(&'a self, rest: &'a str) -> (&'a str, usize) {
        let bytes = rest.as_bytes();
        if let Some((len, _)) = self
            .user_defined
            .as_ref()
            .and_then(|u| u.longest_prefix(rest))
        {
            return (&rest[..len], len);
        }
        if let Some((len, replacement)) = self
            .charsmap
            .as_ref()
            .and_then(|map| map.longest_prefix(bytes))
        {
            return (replacement, len);
        }
        let len = utf8_len(bytes[0]);
        (&rest[..len], len)
    }

    fn refresh_tables(&mut self) {
        let starts_symbol = |b: u8| self.user_defined.as_ref().is_some_and(|u| u.may_start(b));
        let mut ascii = Vec::with_capacity(128);
        let mut ascii_next = Vec::with_capacity(128);
        let mut ascii_self = [false; 128];
        for b in 0..128u8 {
            let (rule, next) = match &self.charsmap {
                Some(map) => map.byte_rules(b),
                None => (None, [0u64; 4]),
            };
            let own = char::from(b).to_string();
            let rep = if starts_symbol(b) {
                None
            } else {
                Some(rule.unwrap_or(&own).into())
            };
            ascii_self[b as usize] = b != b' ' && rep.as_deref() == Some(own.as_str());
            ascii.push(rep);
            ascii_next.push(next);
        }
        let mut run_byte = [false; 256];
        for b in 0..128usize {
            // Bits 0..128 of the continuation set are the ASCII bytes.
            run_byte[b] = ascii_self[b] && ascii_next[b][0] == 0 && ascii_next[b][1] == 0;
        }
        self.ascii = ascii;
        self.ascii_next = ascii_next;
        self.ascii_self = ascii_self;
        self.run_byte = run_byte;
    }

    /// Whether byte `next` continues a longer charsmap rule after the ASCII byte `b`.
    #[inline(always)]
    fn continues(&self, b: u8, next: u8) -> bool {
        (self.ascii_next[b as usize][(next >> 6) as usize] >> (next & 63)) & 1 == 1
    }

    /// How many bytes at the start of `bytes` are ASCII that stays as it is (no space, no
    /// rule, no user-defined symbol): they can be copied at once.
    #[inline(always)]
    fn plain_run(&self, bytes: &[u8]) -> usize {
        // Bytes inside a run of `run_byte`s are followed by ASCII, which continues nothing;
        // only the last one's successor needs the test.
        let mut i = bytes
            .iter()
            .take_while(|&&b| self.run_byte[b as usize])
            .count();
        if i > 0
            && bytes
                .get(i)
                .is_some_and(|&n| self.continues(bytes[i - 1], n))
        {
            i -= 1;
        }
        if i > 0 {
            return i;
        }
        while i < bytes.len() && bytes[i] < 128 && self.ascii_self[bytes[i] as usize] {
            if bytes
                .get(i + 1)
                .is_some_and(|&n| self.continues(bytes[i], n))
            {
                break;
            }
            i += 1;
        }
        i
    }

    /// [`SentencePieceNormalizer::prefix`], with tables first: ASCII bytes, then the charsmap's
    /// per-character table (when no user-defined symbol starts with the byte).
    #[inline(always)]
    fn prefix_fast<'a>(&'a self, rest: &'a str) -> (&'a str, usize) {
        let bytes = rest.as_bytes();
        let b = bytes[0];
        if b < 128 {
            if let Some(rep) = &self.ascii[b as usize] {
                if !bytes.get(1).is_some_and(|&n| self.continues(b, n)) {
                    return (rep, 1);
                }
            }
            return self.prefix(rest);
        }
        let symbol = self.user_defined.as_ref().is_some_and(|u| u.may_start(b));
        if let (Some(map), false) = (&self.charsmap, symbol) {
            let len = utf8_len(b);
            if len <= 3 {
                let c = decode_bmp(bytes, len);
                match map.char_rule(c) {
                    CharRule::None => return (&rest[..len], len),
                    CharRule::Replace(r) => return (r, len),
                    CharRule::Walk => {}
                }
            }
        }
        self.prefix(rest)
    }

    /// The normalized text, as sentencepiece gives it (`SentencePieceProcessor::Normalize`).
    pub fn normalize(&self, text: &str) -> String {
        let mut out = String::new();
        self.normalize_into(text, &mut out);
        out
    }

    /// [`SentencePieceNormalizer::normalize`] into `out` (cleared first).
    pub fn normalize_into(&self, text: &str, out: &mut String) {
        out.clear();
        let mut rest = text;
        if self.remove_extra_whitespaces {
            while !rest.is_empty() {
                let (normalized, len) = self.prefix_fast(rest);
                if normalized != " " {
                    break;
                }
                rest = &rest[len..];
            }
        }
        if rest.is_empty() {
            return;
        }
        // Room for `▁` (3 bytes) for one space in four, about what prose has.
        out.reserve(rest.len() + rest.len() / 2 + 8);
        let space = self.space();
        if !self.treat_whitespace_as_suffix && self.add_dummy_prefix {
            out.push_str(space);
        }
        let mut is_prev_space = self.remove_extra_whitespaces;
        let plain_space = self.ascii[b' ' as usize].as_deref() == Some(" ");
        // Indexes into the bytes in the fast paths, which only ever stop at ASCII bytes, so
        // every `i` there is a character boundary.
        let bytes = rest.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            // A run of plain ASCII is copied whole: it cannot start with a space and does not
            // end with one.
            let run = self.plain_run(&bytes[i..]);
            if run > 0 {
                out.push_str(&rest[i..i + run]);
                i += run;
                is_prev_space = false;
                continue;
            }
            // A plain space (the common case between words), without the general path.
            if bytes[i] == b' '
                && plain_space
                && !bytes.get(i + 1).is_some_and(|&n| self.continues(b' ', n))
            {
                if !is_prev_space {
                    out.push_str(space);
                }
                is_prev_space = self.remove_extra_whitespaces;
                i += 1;
                continue;
            }
            let (mut piece, len) = self.prefix_fast(&rest[i..]);
            if is_prev_space {
                piece = piece.trim_start_matches(' ');
            }
            if !piece.is_empty() {
                if self.escape_whitespaces {
                    push_escaped(out, piece);
                } else {
                    out.push_str(piece);
                }
                is_prev_space = piece.ends_with(' ');
            }
            i += len;
            if !self.remove_extra_whitespaces {
                is_prev_space = false;
            }
        }
        if self.remove_extra_whitespaces {
            while out.ends_with(space) {
                out.truncate(out.len() - space.len());
            }
        }
        if self.treat_whitespace_as_suffix && self.add_dummy_prefix {
            out.push_str(space);
        }
    }
}

/// `piece` with every space written as `▁`.
#[inline]
fn push_escaped(out: &mut String, piece: &str) {
    if let [b] = piece.as_bytes() {
        if *b == b' ' {
            out.push_str(SPACE_SYMBOL);
        } else {
            out.push(char::from(*b));
        }
        return;
    }
    let mut rest = piece;
    while let Some(i) = memchr::memchr(b' ', rest.as_bytes()) {
        out.push_str(&rest[..i]);
        out.push_str(SPACE_SYMBOL);
        rest = &rest[i + 1..];
    }
    out.push_str(rest);
}

/// The code point of the 2- or 3-byte character at the start of `b` (valid UTF-8).
#[inline(always)]
fn decode_bmp(b: &[u8], len: usize) -> u32 {
    if len == 2 {
        (u32::from(b[0] & 0x1f) << 6) | u32::from(b[1] & 0x3f)
    } else {
        (u32::from(b[0] & 0x0f) << 12) | (u32::from(b[1] & 0x3f) << 6) | u32::from(b[2] & 0x3f)
    }
}

/// Length of the UTF-8 character a lead byte starts (sentencepiece's `OneCharLen`; the text is
/// valid UTF-8, so never a trailing byte here).
#[inline]
pub(crate) fn utf8_len(lead: u8) -> usize {
    match lead {
        0x00..=0xbf => 1,
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        _ => 4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(dummy: bool, remove: bool, escape: bool, suffix: bool) -> SentencePieceNormalizer {
        SentencePieceNormalizer::new("identity", None, dummy, remove, escape, suffix)
    }

    #[test]
    fn whitespace_rules_without_a_charsmap() {
        let n = identity(true, true, true, false);
        assert_eq!(n.normalize("  hello   world  "), "▁hello▁world");
        assert_eq!(n.normalize("   "), "");
        assert_eq!(n.normalize(""), "");
        // Only the space is whitespace without a charsmap: a tab stays.
        assert_eq!(n.normalize("a\tb"), "▁a\tb");
        let n = identity(false, false, false, false);
        assert_eq!(n.normalize("  a  b "), "  a  b ");
        let n = identity(true, false, true, false);
        assert_eq!(n.normalize(" a  b "), "▁▁a▁▁b▁");
        let n = identity(true, true, true, true);
        assert_eq!(n.normalize(" a b "), "a▁b▁");
    }

    #[test]
    fn user_defined_symbols_pass_through_longest_first() {
        let n = identity(true, true, true, false).with_user_defined(["<sep>", "<se", "a b"]);
        assert_eq!(n.normalize("x<sep>y a b"), "▁x<sep>y▁a▁b");
        assert_eq!(n.normalize("<se"), "▁<se");
    }

    #[test]
    fn long_plain_runs_take_the_fast_path_and_agree() {
        let n = identity(true, true, true, false);
        let text = "word ".repeat(40) + "  end ";
        let expected: String = format!("▁{}", "word▁".repeat(40)) + "end";
        assert_eq!(n.normalize(&text), expected);
    }
}
