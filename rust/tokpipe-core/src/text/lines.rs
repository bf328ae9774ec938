//! Line helpers with Python's semantics, so the quality kernels cut and strip text exactly as
//! datatrove does: `str.isspace`, `str.strip`, `str.splitlines`.

/// Python's `str.isspace` for one character: Unicode White_Space plus U+001C..U+001F.
#[inline]
pub fn is_py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Python's `str.strip()`.
#[inline]
pub fn py_strip(s: &str) -> &str {
    s.trim_matches(is_py_space)
}

/// A set of line endings (`str.endswith(tuple)`), checked in one hash lookup for the common
/// case of single characters rather than one comparison per ending: FineWeb's default list
/// has some 200 terminal punctuation marks.
pub struct Endings {
    chars: rustc_hash::FxHashSet<char>,
    longer: Vec<String>,
}

impl Endings {
    pub fn new(endings: &[String]) -> Self {
        let mut chars = rustc_hash::FxHashSet::default();
        let mut longer = Vec::new();
        for e in endings {
            let mut it = e.chars();
            match (it.next(), it.next()) {
                (Some(c), None) => {
                    chars.insert(c);
                }
                // "".endswith("") is true for every line, as in Python.
                _ => longer.push(e.clone()),
            }
        }
        Endings { chars, longer }
    }

    #[inline]
    pub fn matches(&self, line: &str) -> bool {
        line.chars()
            .next_back()
            .is_some_and(|c| self.chars.contains(&c))
            || self.longer.iter().any(|e| line.ends_with(e.as_str()))
    }
}

/// Python's `str.split()` (no argument): the words between runs of whitespace.
pub fn py_words(s: &str) -> impl Iterator<Item = &str> {
    s.split(is_py_space).filter(|w| !w.is_empty())
}

/// Python's `str.splitlines()`: lines cut at `\n`, `\r`, `\r\n`, `\v`, `\f`, `\x1c`..`\x1e`,
/// U+0085, U+2028 and U+2029, without their ends; no empty last line after a final break.
pub fn py_splitlines(s: &str) -> impl Iterator<Item = &str> {
    let bytes = s.as_bytes();
    let mut start = 0usize;
    let mut i = 0usize;
    std::iter::from_fn(move || {
        while i < bytes.len() {
            let b = bytes[i];
            let (brk, len) = match b {
                b'\n' | 0x0b | 0x0c | 0x1c..=0x1e => (true, 1),
                b'\r' => (
                    true,
                    if bytes.get(i + 1) == Some(&b'\n') {
                        2
                    } else {
                        1
                    },
                ),
                0xC2 if bytes.get(i + 1) == Some(&0x85) => (true, 2),
                0xE2 if bytes.get(i + 1) == Some(&0x80)
                    && matches!(bytes.get(i + 2), Some(&0xA8) | Some(&0xA9)) =>
                {
                    (true, 3)
                }
                _ => (false, 1),
            };
            if brk {
                let line = &s[start..i];
                i += len;
                start = i;
                return Some(line);
            }
            i += 1;
        }
        if start < bytes.len() {
            let line = &s[start..];
            start = bytes.len();
            return Some(line);
        }
        None
    })
}

/// Number of characters (code points), as Python's `len`.
#[inline]
pub fn char_len(s: &str) -> usize {
    if s.is_ascii() {
        s.len()
    } else {
        s.chars().count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitlines_like_python() {
        let v: Vec<&str> = py_splitlines("a\nb\r\nc\rd\u{2028}e\u{85}f\n\ng\n").collect();
        assert_eq!(v, ["a", "b", "c", "d", "e", "f", "", "g"]);
        assert_eq!(py_splitlines("").count(), 0);
        assert_eq!(py_splitlines("\n").collect::<Vec<_>>(), [""]);
    }

    #[test]
    fn strip_like_python() {
        assert_eq!(py_strip("\u{1f} a b\u{3000}\t"), "a b");
        assert_eq!(
            py_words(" a  b\u{a0}c ").collect::<Vec<_>>(),
            ["a", "b", "c"]
        );
    }
}
