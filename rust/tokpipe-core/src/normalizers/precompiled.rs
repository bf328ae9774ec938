//! sentencepiece's precompiled charsmap: the normalization rules (`nmt_nfkc`, `nfkc`,
//! `nmt_nfkc_cf`, ...) as they sit inside a `.model` and, base64-encoded, inside HF's
//! `Precompiled` normalizer.
//!
//! The blob is `<trie size: u32 LE><darts-clone double array><replacement strings>`: the double
//! array maps a rule's source bytes to an offset into the replacement strings, each ending with
//! a NUL byte. Two ways of reading it are needed, because the two peers read it differently:
//! - [`CharsMap::longest_prefix`] is sentencepiece's: at each position the longest rule that is
//!   a prefix of the remaining text.
//! - [`CharsMap::hf_transform`] is HF's (`spm_precompiled`): the first, i.e. shortest, rule that
//!   is a prefix of a chunk (a grapheme or a char), looked up only up to a NUL byte.
//!
//! HF's reading segments text into graphemes; [`hf_normalize`] skips the segmenter for the
//! characters that are graphemes by themselves (see `is_plain`), most of real text.
//!
//! (Over 500 lines: the two readings of one double array and the grapheme shortcut share its
//! tables, and the test that checks the shortcut against whole-text segmentation sits beside it.)
//!
// Why our own reader rather than the `spm_precompiled` crate HF uses: the crate implements only
// HF's reading (we need sentencepiece's longest match as well), allocates a Vec per lookup,
// indexes the array unchecked (a malformed blob panics), and has had no release since 2022. The
// double array's lookup is a dozen lines; here every index is checked and every replacement is
// validated once, at load, so a broken file is an error and never a panic.

/// A charsmap ready for lookups; keeps the blob it was read from so it can be written back.
#[derive(Clone, Debug)]
pub struct CharsMap {
    blob: Vec<u8>,
    units: Vec<u32>,
    /// Where the replacement strings start within `blob`.
    strings_at: usize,
    /// `starts_rule[b]`: some rule begins with byte `b` (the root's transitions), so text
    /// starting with another byte needs no trie walk.
    starts_rule: [bool; 256],
    /// What sentencepiece's longest match does with each character of the Basic Multilingual
    /// Plane, worked out once so a character costs one lookup instead of a walk of up to three
    /// dependent reads: [`NO_RULE`], [`WALK`] (longer rules start with it), or `2 + i` for
    /// `replacements[i]`. 256 KiB; the characters of a text in any script sit close together.
    bmp: Vec<u32>,
    /// (start, length) in the strings of the replacements single characters have.
    replacements: Vec<(u32, u32)>,
    /// `hf_transform` of each ASCII byte alone: what HF makes of an ASCII character that is a
    /// grapheme by itself, without a walk. 128 entries.
    ascii_hf: Vec<Option<Box<str>>>,
}

const NO_RULE: u32 = 0;
const WALK: u32 = 1;

/// A character as [`CharsMap::char_rule`] classifies it.
pub enum CharRule<'a> {
    /// No rule starts with it: it stays as it is.
    None,
    /// Rules longer than the character start with it: the longest match needs a walk.
    Walk,
    /// Its one rule, for the character alone.
    Replace(&'a str),
}

#[inline]
fn has_leaf(unit: u32) -> bool {
    (unit >> 8) & 1 == 1
}

#[inline]
fn value(unit: u32) -> u32 {
    unit & ((1 << 31) - 1)
}

#[inline]
fn label(unit: u32) -> u32 {
    unit & ((1 << 31) | 0xff)
}

#[inline]
fn offset(unit: u32) -> u32 {
    (unit >> 10) << ((unit & (1 << 9)) >> 6)
}

impl CharsMap {
    /// Reads a `precompiled_charsmap` blob. The error says what is wrong with it.
    pub fn from_bytes(blob: &[u8]) -> Result<Self, String> {
        let size = blob
            .get(..4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize)
            .filter(|_| blob.len() > 4)
            .ok_or("precompiled_charsmap is too short to hold its header")?;
        if size > blob.len() - 4 {
            return Err(format!(
                "precompiled_charsmap: trie size {size} does not fit the {} bytes of the blob",
                blob.len()
            ));
        }
        let units: Vec<u32> = blob[4..4 + size]
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect();
        let strings_at = 4 + size;
        let map = CharsMap {
            blob: blob.to_vec(),
            units,
            strings_at,
            starts_rule: [false; 256],
            bmp: Vec::new(),
            replacements: Vec::new(),
            ascii_hf: Vec::new(),
        };
        // Value units (the only ones with the top bit set) point at replacement strings: each
        // must lie inside the blob and be UTF-8, since it is copied into normalized text.
        for &unit in &map.units {
            if unit >> 31 == 1 {
                let at = value(unit) as usize;
                let s = map.string_at(at).ok_or_else(|| {
                    format!("precompiled_charsmap: rule points at byte {at}, past its strings")
                })?;
                std::str::from_utf8(s).map_err(|_| {
                    format!("precompiled_charsmap: the replacement at byte {at} is not UTF-8")
                })?;
            }
        }
        let mut map = map;
        let root = offset(map.unit(0));
        for b in 0..=255u32 {
            map.starts_rule[b as usize] = label(map.unit(root ^ b)) == b;
        }
        map.build_bmp_table();
        map.ascii_hf = (0..128u8)
            .map(|b| map.hf_transform(&[b]).map(Into::into))
            .collect();
        Ok(map)
    }

    fn build_bmp_table(&mut self) {
        let mut table = vec![NO_RULE; 0x10000];
        let mut replacements: Vec<(u32, u32)> = Vec::new();
        let mut index: std::collections::HashMap<(u32, u32), u32> = Default::default();
        for (cp, slot) in table.iter_mut().enumerate() {
            let Some(c) = char::from_u32(cp as u32) else {
                continue;
            };
            let mut buf = [0u8; 4];
            let bytes = c.encode_utf8(&mut buf).as_bytes();
            if !self.may_match(bytes[0]) {
                continue;
            }
            let mut node = offset(self.unit(0));
            let mut last = 0;
            let mut complete = true;
            for &b in bytes {
                node ^= u32::from(b);
                let unit = self.unit(node);
                if label(unit) != u32::from(b) {
                    complete = false;
                    break;
                }
                last = unit;
                node ^= offset(unit);
            }
            if !complete {
                continue;
            }
            let has_children = (0..=255u32).any(|b| label(self.unit(node ^ b)) == b);
            *slot = if has_children {
                WALK
            } else if has_leaf(last) {
                let at = value(self.unit(node));
                let len = self.string_at(at as usize).map_or(0, <[u8]>::len) as u32;
                let next = replacements.len() as u32;
                let i = *index.entry((at, len)).or_insert(next);
                if i == next {
                    replacements.push((at, len));
                }
                2 + i
            } else {
                NO_RULE
            };
        }
        self.bmp = table;
        self.replacements = replacements;
    }

    /// What the longest match makes of the character `c` (see [`CharRule`]).
    #[inline(always)]
    pub fn char_rule(&self, c: u32) -> CharRule<'_> {
        match self.bmp.get(c as usize).copied() {
            Some(NO_RULE) => CharRule::None,
            Some(WALK) | None => CharRule::Walk,
            Some(i) => {
                let (at, len) = self.replacements[(i - 2) as usize];
                let start = self.strings_at + at as usize;
                let s = &self.blob[start..start + len as usize];
                // Checked to be UTF-8 when the blob was read.
                CharRule::Replace(std::str::from_utf8(s).unwrap_or_default())
            }
        }
    }

    /// [`CharsMap::hf_transform`] of the ASCII byte `b` alone, from a table.
    #[inline(always)]
    fn ascii_hf_rule(&self, b: u8) -> Option<&str> {
        self.ascii_hf[usize::from(b & 0x7f)].as_deref()
    }

    /// The blob as read (what a `.model` or `tokenizer.json` stores).
    pub fn blob(&self) -> &[u8] {
        &self.blob
    }

    /// A unit; outside the array reads as an empty unit, which matches no label but 0.
    #[inline]
    fn unit(&self, i: u32) -> u32 {
        self.units.get(i as usize).copied().unwrap_or(0)
    }

    /// The NUL-terminated string at `at` in the replacement strings.
    fn string_at(&self, at: usize) -> Option<&[u8]> {
        let strings = &self.blob[self.strings_at..];
        let rest = strings.get(at..)?;
        let end = memchr::memchr(0, rest).unwrap_or(rest.len());
        Some(&rest[..end])
    }

    /// The replacement a value unit points at (checked at load to be UTF-8).
    #[inline]
    fn replacement(&self, unit: u32) -> &str {
        let s = self.string_at(value(unit) as usize).unwrap_or_default();
        std::str::from_utf8(s).unwrap_or_default()
    }

    /// Byte `b` as the start of rules: the replacement of the rule for `b` alone, if any, and
    /// the bytes that continue some longer rule after it (a set of 256 bits). Under `nmt_nfkc`
    /// every Latin letter starts longer rules (`a` + U+0301 -> `á`), all continued by bytes of
    /// combining marks, so a letter followed by ASCII needs no walk.
    pub fn byte_rules(&self, b: u8) -> (Option<&str>, [u64; 4]) {
        let mut next = [0u64; 4];
        let node = offset(self.unit(0)) ^ u32::from(b);
        let unit = self.unit(node);
        if label(unit) != u32::from(b) {
            return (None, next);
        }
        let children = node ^ offset(unit);
        for c in 0..=255u32 {
            if label(self.unit(children ^ c)) == c {
                next[(c >> 6) as usize] |= 1 << (c & 63);
            }
        }
        (
            has_leaf(unit).then(|| self.replacement(self.unit(children))),
            next,
        )
    }

    /// Whether some rule starts with byte `b`.
    #[inline]
    pub fn may_match(&self, b: u8) -> bool {
        self.starts_rule[b as usize]
    }

    /// sentencepiece's `NormalizePrefix` lookup: the longest rule that is a prefix of `text`,
    /// as (bytes of `text` it covers, replacement).
    #[inline]
    pub fn longest_prefix(&self, text: &[u8]) -> Option<(usize, &str)> {
        if !text.first().is_some_and(|&b| self.may_match(b)) {
            return None;
        }
        let mut node = offset(self.unit(0));
        let mut found = None;
        for (i, &b) in text.iter().enumerate() {
            node ^= u32::from(b);
            let unit = self.unit(node);
            if label(unit) != u32::from(b) {
                break;
            }
            node ^= offset(unit);
            if has_leaf(unit) {
                found = Some((i + 1, self.unit(node)));
            }
        }
        found.map(|(len, leaf)| (len, self.replacement(leaf)))
    }

    /// `spm_precompiled`'s `transform`: the first (shortest) rule that is a prefix of `chunk`,
    /// whatever it leaves of the chunk; the walk stops at a NUL byte.
    pub fn hf_transform(&self, chunk: &[u8]) -> Option<&str> {
        let mut node = offset(self.unit(0));
        for &b in chunk {
            if b == 0 {
                break;
            }
            node ^= u32::from(b);
            let unit = self.unit(node);
            if label(unit) != u32::from(b) {
                return None;
            }
            node ^= offset(unit);
            if has_leaf(unit) {
                return Some(self.replacement(self.unit(node)));
            }
        }
        None
    }
}

/// HF's `Precompiled` normalizer: each grapheme cluster shorter than 6 bytes is replaced whole
/// when a rule is a prefix of it (the shortest such rule, whatever of the grapheme it covers);
/// otherwise each of its characters is looked up alone. HF's own notes call this reading
/// "weird" and keep it because converted models were tested against it.
pub fn hf_normalize<'a>(map: &CharsMap, text: &'a str) -> std::borrow::Cow<'a, str> {
    if !text.bytes().any(|b| map.may_match(b)) {
        return std::borrow::Cow::Borrowed(text);
    }
    // Built straight from the units, without the per-character changes `hf_changes` records
    // for alignments; copied from `text` only once a rule applies.
    let mut out: Option<String> = None;
    let mut copied_to = 0;
    hf_units(map, text, |at, old, new| {
        let out = out.get_or_insert_with(|| String::with_capacity(text.len() + 16));
        out.push_str(&text[copied_to..at]);
        out.push_str(new);
        copied_to = at + old.len();
    });
    match out {
        None => std::borrow::Cow::Borrowed(text),
        Some(mut out) => {
            out.push_str(&text[copied_to..]);
            std::borrow::Cow::Owned(out)
        }
    }
}

/// Whether `c` is "plain" for grapheme segmentation: its cluster category is Other or Control
/// (CR and LF included), and it is neither pictographic nor an Indic conjunct consonant. Two
/// plain characters side by side always have a boundary between them except CR x LF: every
/// rule of UAX #29 that joins two characters needs one of them to be Extend, ZWJ, SpacingMark,
/// Prepend, Hangul, a regional indicator, pictographic or a conjunct consonant.
///
/// ASCII is plain (no ASCII character is of those kinds). Other characters of the Basic
/// Multilingual Plane are classified once per process by asking the segmenter HF uses about
/// each character beside a probe of every joining kind; the planes above it are never plain.
#[inline(always)]
fn is_plain(c: char) -> bool {
    use std::sync::OnceLock;
    static PLAIN_BMP: OnceLock<Vec<u64>> = OnceLock::new();
    if c.is_ascii() {
        return true;
    }
    let cp = c as usize;
    if cp >= 0x10000 {
        return false;
    }
    let bits = PLAIN_BMP.get_or_init(classify_bmp);
    bits[cp >> 6] >> (cp & 63) & 1 == 1
}

/// The bit set of [`is_plain`] over the Basic Multilingual Plane.
fn classify_bmp() -> Vec<u64> {
    use unicode_segmentation::UnicodeSegmentation;
    // Before the character: a letter (it is Extend, ZWJ or SpacingMark), Hangul L, LV and LVT
    // (it is V, T, LV or LVT), an emoji and ZWJ (pictographic), a consonant and virama (a
    // conjunct consonant). After it: a letter (it is Prepend), Hangul L, V and T (it is L, LV,
    // V, LVT or T). And the character twice. (Regional indicators lie above the BMP.)
    const BEFORE: [&str; 6] = [
        "a",
        "\u{1100}",
        "\u{ac00}",
        "\u{ac01}",
        "\u{1f600}\u{200d}",
        "\u{915}\u{94d}",
    ];
    const AFTER: [&str; 4] = ["a", "\u{1100}", "\u{1161}", "\u{11a8}"];
    let splits = |left: &str, right: &str| {
        let text = format!("{left}{right}");
        text.grapheme_indices(true).any(|(at, _)| at == left.len())
    };
    let mut bits = vec![0u64; 0x10000 / 64];
    let mut buf = [0u8; 4];
    for cp in 0x80..0x10000u32 {
        let Some(c) = char::from_u32(cp) else {
            continue;
        };
        let c = &*c.encode_utf8(&mut buf);
        let plain = BEFORE.iter().all(|p| splits(p, c))
            && AFTER.iter().all(|q| splits(c, q))
            && splits(c, c);
        if plain {
            bits[cp as usize >> 6] |= 1 << (cp & 63);
        }
    }
    bits
}

/// HF's reading of `text` (see [`hf_normalize`]): `emit(at, old, new)` for each grapheme or
/// character, at byte `at`, that a rule replaces with `new`; the rest stays as it is. A plain
/// character (see [`is_plain`]) between plain neighbours, and not half of a CR LF, is a
/// grapheme by itself and is looked up alone (ASCII from a table); the stretches between such
/// characters, which start and end on grapheme boundaries, are segmented as HF segments them.
fn hf_units(map: &CharsMap, text: &str, mut emit: impl FnMut(usize, &str, &str)) {
    let bytes = text.as_bytes();
    // The character at byte `i`, a character boundary; ASCII without decoding.
    let char_at = |i: usize| match bytes.get(i) {
        None => None,
        Some(&b) if b < 0x80 => Some(b as char),
        Some(_) => text[i..].chars().next(),
    };
    let mut stretch_from = 0;
    let mut before: Option<char> = None;
    let mut i = 0;
    while let Some(c) = char_at(i) {
        // A run of ASCII characters without a rule of their own (most of English text), each
        // followed by ASCII and none a CR: all alone (plain between plain neighbours, no CR LF
        // pair) and unchanged, so skipped in one tight loop.
        if c.is_ascii() && before.is_none_or(|b| b.is_ascii() && b != '\r') {
            let mut j = i;
            while j + 1 < bytes.len()
                && bytes[j + 1] < 0x80
                && bytes[j] != b'\r'
                && map.ascii_hf_rule(bytes[j]).is_none()
            {
                j += 1;
            }
            if j > i {
                if stretch_from < i {
                    hf_units_segmented(map, &text[stretch_from..i], stretch_from, &mut emit);
                }
                stretch_from = j;
                before = Some(bytes[j - 1] as char);
                i = j;
                continue;
            }
        }
        let end = i + c.len_utf8();
        let after = char_at(end);
        let alone = is_plain(c)
            && before.is_none_or(|b| is_plain(b) && !(b == '\r' && c == '\n'))
            && after.is_none_or(|a| is_plain(a) && !(c == '\r' && a == '\n'));
        if alone {
            if stretch_from < i {
                hf_units_segmented(map, &text[stretch_from..i], stretch_from, &mut emit);
            }
            let new = if c.is_ascii() {
                map.ascii_hf_rule(c as u8)
            } else {
                map.hf_transform(&bytes[i..end])
            };
            if let Some(new) = new {
                emit(i, &text[i..end], new);
            }
            stretch_from = end;
        }
        before = Some(c);
        i = end;
    }
    if stretch_from < text.len() {
        hf_units_segmented(map, &text[stretch_from..], stretch_from, &mut emit);
    }
}

/// [`hf_units`] for a stretch that starts and ends on grapheme boundaries, grapheme by
/// grapheme as HF reads it; `base` is the stretch's byte offset in the text.
fn hf_units_segmented(
    map: &CharsMap,
    stretch: &str,
    base: usize,
    emit: &mut impl FnMut(usize, &str, &str),
) {
    use unicode_segmentation::UnicodeSegmentation;
    for (g_at, grapheme) in stretch.grapheme_indices(true) {
        if grapheme.len() < 6 {
            if let Some(norm) = map.hf_transform(grapheme.as_bytes()) {
                emit(base + g_at, grapheme, norm);
                continue;
            }
        }
        for (i, c) in grapheme.char_indices() {
            let part = &grapheme[i..i + c.len_utf8()];
            if let Some(norm) = map.hf_transform(part.as_bytes()) {
                emit(base + g_at + i, part, norm);
            }
        }
    }
}

/// The output of [`hf_normalize`] as HF builds it: each new character with its change (`0`
/// replaces an old character, `1` is inserted, `-n` also removes `n` more), for HF's alignment
/// bookkeeping; `None` when no rule applies.
pub(crate) fn hf_changes(map: &CharsMap, text: &str) -> Option<Vec<(char, isize)>> {
    if !text.bytes().any(|b| map.may_match(b)) {
        return None;
    }
    let mut changes: Vec<(char, isize)> = Vec::with_capacity(text.len());
    let mut modified = false;
    let mut copied_to = 0;
    hf_units(map, text, |at, old, new| {
        // The characters no rule touched, before this unit.
        changes.extend(text[copied_to..at].chars().map(|c| (c, 0)));
        copied_to = at + old.len();
        modified = true;
        let diff = new.chars().count() as isize - old.chars().count() as isize;
        changes.extend(new.chars().map(|c| (c, 0)));
        if diff > 0 {
            for entry in changes.iter_mut().rev().take(diff as usize) {
                entry.1 = 1;
            }
        } else if diff < 0 {
            // HF records a removal on the character before; at the very start there is none
            // and the removal goes unrecorded.
            if let Some(last) = changes.last_mut() {
                last.1 += diff;
            }
        }
    });
    changes.extend(text[copied_to..].chars().map(|c| (c, 0)));
    modified.then_some(changes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broken_blobs_are_errors() {
        assert!(CharsMap::from_bytes(&[]).is_err());
        assert!(CharsMap::from_bytes(&[4, 0, 0, 0]).is_err());
        // Trie size larger than the blob.
        assert!(CharsMap::from_bytes(&[200, 0, 0, 0, 1, 2, 3, 4, 5]).is_err());
        // A value unit pointing past the strings.
        let mut blob = 4u32.to_le_bytes().to_vec();
        blob.extend_from_slice(&((1u32 << 31) | 1000).to_le_bytes());
        blob.extend_from_slice(b"a\0");
        assert!(CharsMap::from_bytes(&blob).is_err());
    }

    /// HF's reading as `spm_precompiled` writes it: the whole text segmented into graphemes,
    /// with no shortcut for ASCII.
    fn reference_units(map: &CharsMap, text: &str) -> Vec<(usize, String, String)> {
        let mut units = Vec::new();
        hf_units_segmented(map, text, 0, &mut |at, old: &str, new: &str| {
            units.push((at, old.to_string(), new.to_string()));
        });
        units
    }

    #[test]
    fn the_ascii_shortcut_reads_text_as_whole_text_segmentation_does() {
        // Characters that join graphemes with their neighbours (CR LF, combining marks, ZWJ,
        // a Prepend, a SpacingMark, a virama, Hangul jamo and syllables, regional indicators,
        // emoji, a variation selector, kana voicing marks) beside ASCII and other characters
        // that nmt_nfkc rewrites (NUL, tab, newline, ligatures, fullwidth, halfwidth kana) or
        // leaves alone (kanji, kana, a character above the BMP).
        let alphabet: Vec<char> = "ab e\r\n\t\0.\u{301}\u{200d}\u{600}\u{915}\u{93f}\u{94d}\
                                   \u{1100}\u{1161}\u{11a8}\u{ac00}\u{ac01}\u{1f1e6}\u{1f600}\
                                   \u{fb01}\u{ff21}\u{a0}\u{e9}\u{2460}猫吾かが\u{3099}ｶ\u{ff9e}\
                                   \u{fe0f}\u{2764}\u{20000}"
            .chars()
            .collect();
        let blob = crate::normalizers::spm_rules::precompiled_charsmap("nmt_nfkc").unwrap();
        let map = CharsMap::from_bytes(&blob).unwrap();
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..50_000 {
            let len = (next() % 10) as usize;
            let text: String = (0..len)
                .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                .collect();
            let mut units = Vec::new();
            hf_units(&map, &text, |at, old, new| {
                units.push((at, old.to_string(), new.to_string()));
            });
            let expected = reference_units(&map, &text);
            assert_eq!(units, expected, "{text:?}");
            let mut normalized = String::new();
            let mut copied_to = 0;
            for (at, old, new) in &expected {
                normalized.push_str(&text[copied_to..*at]);
                normalized.push_str(new);
                copied_to = at + old.len();
            }
            normalized.push_str(&text[copied_to..]);
            assert_eq!(hf_normalize(&map, &text), normalized, "{text:?}");
        }
    }

    #[test]
    fn an_empty_trie_matches_nothing() {
        let mut blob = 4u32.to_le_bytes().to_vec();
        blob.extend_from_slice(&0u32.to_le_bytes());
        blob.extend_from_slice(b"\0");
        let map = CharsMap::from_bytes(&blob).unwrap();
        assert_eq!(map.longest_prefix(b"abc"), None);
        assert_eq!(map.hf_transform(b"abc"), None);
    }
}
