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
    match hf_changes(map, text) {
        None => std::borrow::Cow::Borrowed(text),
        Some(changes) => std::borrow::Cow::Owned(changes.iter().map(|&(c, _)| c).collect()),
    }
}

/// The output of [`hf_normalize`] as HF builds it: each new character with its change (`0`
/// replaces an old character, `1` is inserted, `-n` also removes `n` more), for HF's alignment
/// bookkeeping; `None` when no rule applies.
pub(crate) fn hf_changes(map: &CharsMap, text: &str) -> Option<Vec<(char, isize)>> {
    use unicode_segmentation::UnicodeSegmentation;
    if !text.bytes().any(|b| map.may_match(b)) {
        return None;
    }
    let mut changes: Vec<(char, isize)> = Vec::with_capacity(text.len());
    let mut modified = false;
    let mut replace = |changes: &mut Vec<(char, isize)>, old: &str, new: &str| {
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
    };
    for grapheme in text.graphemes(true) {
        if grapheme.len() < 6 {
            if let Some(norm) = map.hf_transform(grapheme.as_bytes()) {
                replace(&mut changes, grapheme, norm);
                continue;
            }
        }
        for (i, c) in grapheme.char_indices() {
            let part = &grapheme[i..i + c.len_utf8()];
            match map.hf_transform(part.as_bytes()) {
                Some(norm) => replace(&mut changes, part, norm),
                None => changes.push((c, 0)),
            }
        }
    }
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
