//! ARPA files, read and written the way KenLM reads and writes them.
//!
//! ```text
//! \data\
//! ngram 1=5
//! ngram 2=7
//!
//! \1-grams:
//! -0.90309  <unk>  0
//! 0  <s>  -0.30103
//! ...
//! \2-grams:
//! -0.37712017  <s> a
//! ...
//! \end\
//! ```
//!
//! (written with tabs between the fields). Each entry is a log10 probability, the n-gram's
//! words, and for every order but the highest an optional log10 backoff (absent means 0). Fields are separated by tabs or spaces (KenLM's
//! `kARPASpaces`: tab, space, CR), so a word is any run of other bytes. Lines before `\data\`
//! are ignored (KenLM accepts only blank and `#` lines there). As in KenLM, a positive log
//! probability, a non-finite backoff, or a non-zero backoff on a highest-order n-gram is an
//! error, and the counts in the header must match the entries.
//!
//! The reader streams entries to an [`ArpaVisitor`] and never holds the file; the writer takes
//! entries order by order. Floats are written in Rust's shortest round-trip form, so a value
//! read back is the same `f32` bit for bit.

use crate::error::{Error, Result};
use std::io::{BufRead, Write};

/// Receives an ARPA file's contents in file order.
pub trait ArpaVisitor {
    /// The header's n-gram counts, `counts[n - 1]` for order `n`, before any entry.
    fn counts(&mut self, counts: &[u64]) -> Result<()>;
    /// One entry of order `words.len()`.
    fn entry(&mut self, words: &[&str], prob: f32, backoff: Option<f32>) -> Result<()>;
}

/// ARPA field separators (KenLM's `kARPASpaces`).
#[inline]
fn is_arpa_space(b: u8) -> bool {
    matches!(b, b'\t' | b' ' | b'\r')
}

fn is_blank(line: &str) -> bool {
    line.bytes().all(|b| b.is_ascii_whitespace() || b == 0x0b)
}

fn parse_float(field: &str, what: &str, source: &str, line_no: u64) -> Result<f32> {
    field.parse::<f32>().map_err(|_| {
        Error::format(
            format!("{source}:{line_no}"),
            format!("bad {what} {field:?}"),
        )
    })
}

/// Lines of the file, numbered, without their `\n`.
struct Lines<R> {
    reader: R,
    line: String,
    line_no: u64,
    source: String,
}

impl<R: BufRead> Lines<R> {
    /// Reads the next line; false at the end of the file.
    fn next(&mut self) -> Result<bool> {
        self.line.clear();
        let n = self
            .reader
            .read_line(&mut self.line)
            .map_err(|e| Error::io(&self.source, e))?;
        self.line_no += 1;
        if self.line.ends_with('\n') {
            self.line.pop();
        }
        Ok(n > 0)
    }

    fn err(&self, message: String) -> Error {
        Error::format(format!("{}:{}", self.source, self.line_no), message)
    }
}

/// The most words an entry may have (higher orders are refused by the model anyway).
const MAX_WORDS: usize = 32;

/// Reads an ARPA file from `reader` (`source` names it in errors) into `visitor`.
pub fn read(reader: impl BufRead, source: &str, visitor: &mut impl ArpaVisitor) -> Result<()> {
    let mut lines = Lines {
        reader,
        line: String::new(),
        line_no: 0,
        source: source.to_string(),
    };

    // Header.
    loop {
        if !lines.next()? {
            return Err(Error::format(source, "no \\data\\ line: not an ARPA file"));
        }
        if lines.line.trim_end() == "\\data\\" {
            break;
        }
    }
    let mut counts: Vec<u64> = Vec::new();
    loop {
        if !lines.next()? {
            return Err(lines.err("the file ends inside its header".into()));
        }
        let text = lines.line.trim();
        if text.is_empty() {
            if counts.is_empty() {
                continue;
            }
            break;
        }
        let parsed = text.strip_prefix("ngram ").and_then(|rest| {
            let (n, count) = rest.split_once('=')?;
            Some((
                n.trim().parse::<usize>().ok()?,
                count.trim().parse::<u64>().ok()?,
            ))
        });
        match parsed {
            Some((n, count)) if n == counts.len() + 1 => counts.push(count),
            Some((n, _)) => {
                return Err(lines.err(format!(
                    "n-gram orders must be consecutive from 1, got order {n}"
                )))
            }
            // A section header right after the counts, with no blank line between.
            None if text.starts_with('\\') && !counts.is_empty() => break,
            None => {
                let text = text.to_string();
                return Err(lines.err(format!("expected \"ngram N=COUNT\", got {text:?}")));
            }
        }
    }
    if counts.is_empty() {
        return Err(lines.err("the header lists no n-gram counts".into()));
    }
    if counts.len() > MAX_WORDS {
        return Err(lines.err(format!("order {} is too high", counts.len())));
    }
    visitor.counts(&counts)?;
    let order = counts.len();

    // The header loop may have stopped on the first section header already.
    let mut pending = !lines.line.trim().is_empty();
    for n in 1..=order {
        let expected = format!("\\{n}-grams:");
        loop {
            if !pending && !lines.next()? {
                return Err(lines.err(format!("the file ends before {expected}")));
            }
            pending = false;
            if !is_blank(&lines.line) {
                break;
            }
        }
        if lines.line.trim_end() != expected {
            let got = lines.line.trim_end().to_string();
            return Err(lines.err(format!("expected {expected}, got {got:?}")));
        }
        for _ in 0..counts[n - 1] {
            if !lines.next()? {
                return Err(lines.err(format!("the file ends inside the {n}-grams")));
            }
            let line_no = lines.line_no;
            let err = |message: String| Error::format(format!("{source}:{line_no}"), message);
            let mut fields = lines
                .line
                .split(|c: char| c.is_ascii() && is_arpa_space(c as u8))
                .filter(|f| !f.is_empty());
            let Some(prob) = fields.next() else {
                return Err(err(format!(
                    "expected {} {n}-grams, found fewer",
                    counts[n - 1]
                )));
            };
            let prob = parse_float(prob, "probability", source, line_no)?;
            if prob > 0.0 {
                return Err(err(format!("positive log10 probability {prob}")));
            }
            let mut words = [""; MAX_WORDS];
            for word in words.iter_mut().take(n) {
                match fields.next() {
                    Some(w) => *word = w,
                    None => return Err(err(format!("a {n}-gram needs {n} words"))),
                }
            }
            let backoff = match fields.next() {
                None => None,
                Some(b) => {
                    let b = parse_float(b, "backoff", source, line_no)?;
                    if !b.is_finite() {
                        return Err(err(format!("bad backoff {b}")));
                    }
                    if n == order && b != 0.0 {
                        return Err(err(format!(
                            "non-zero backoff {b} on a highest-order n-gram"
                        )));
                    }
                    Some(b)
                }
            };
            if let Some(extra) = fields.next() {
                return Err(err(format!(
                    "unexpected field {extra:?} after the {n}-gram"
                )));
            }
            visitor.entry(&words[..n], prob, backoff)?;
        }
    }
    loop {
        if !lines.next()? {
            return Err(lines.err("the file ends without \\end\\".into()));
        }
        if is_blank(&lines.line) {
            continue;
        }
        if lines.line.trim_end() == "\\end\\" {
            return Ok(());
        }
        let got = lines.line.trim_end().to_string();
        return Err(lines.err(format!(
            "expected \\end\\ (more entries than the header counts?), got {got:?}"
        )));
    }
}

/// Writes an ARPA file: `counts` is the header, then `write_order(n, out)` writes the entries
/// of order `n` (1..=order) with [`write_entry`].
pub fn write(
    out: &mut impl Write,
    counts: &[u64],
    mut write_order: impl FnMut(usize, &mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    writeln!(out, "\\data\\")?;
    for (i, c) in counts.iter().enumerate() {
        writeln!(out, "ngram {}={c}", i + 1)?;
    }
    for n in 1..=counts.len() {
        write!(out, "\n\\{n}-grams:\n")?;
        write_order(n, out)?;
    }
    writeln!(out, "\n\\end\\")
}

/// One ARPA entry line; `backoff` is `None` for the highest order.
pub fn write_entry(
    out: &mut dyn Write,
    prob: f32,
    words: impl IntoIterator<Item = impl AsRef<[u8]>>,
    backoff: Option<f32>,
) -> std::io::Result<()> {
    write!(out, "{prob}\t")?;
    for (i, w) in words.into_iter().enumerate() {
        if i > 0 {
            out.write_all(b" ")?;
        }
        out.write_all(w.as_ref())?;
    }
    match backoff {
        Some(b) => writeln!(out, "\t{b}"),
        None => writeln!(out),
    }
}

#[cfg(test)]
// -0.30103 and the like are log10 probabilities as ARPA files print them, not log10(2).
#[allow(clippy::approx_constant)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Collect {
        counts: Vec<u64>,
        entries: Vec<(Vec<String>, f32, Option<f32>)>,
    }

    impl ArpaVisitor for Collect {
        fn counts(&mut self, counts: &[u64]) -> Result<()> {
            self.counts = counts.to_vec();
            Ok(())
        }
        fn entry(&mut self, words: &[&str], prob: f32, backoff: Option<f32>) -> Result<()> {
            self.entries
                .push((words.iter().map(|w| w.to_string()).collect(), prob, backoff));
            Ok(())
        }
    }

    fn parse(text: &str) -> Result<Collect> {
        let mut c = Collect::default();
        read(text.as_bytes(), "test.arpa", &mut c)?;
        Ok(c)
    }

    const TOY: &str = "# comment\n\n\\data\\\nngram 1=3\nngram 2=2\n\n\\1-grams:\n-1\t<s>\t-0.5\n-0.5 </s>\n-0.25\ta\t-0.125\r\n\n\\2-grams:\n-0.1\t<s> a\n-0.2\ta </s>\t0\n\n\\end\\\n";

    #[test]
    fn reads_entries_and_backoffs() {
        let c = parse(TOY).unwrap();
        assert_eq!(c.counts, [3, 2]);
        assert_eq!(c.entries[0], (vec!["<s>".to_string()], -1.0, Some(-0.5)));
        assert_eq!(c.entries[1], (vec!["</s>".to_string()], -0.5, None));
        assert_eq!(c.entries[2].2, Some(-0.125));
        assert_eq!(
            c.entries[4],
            (vec!["a".into(), "</s>".into()], -0.2, Some(0.0))
        );
    }

    #[test]
    fn refuses_what_kenlm_refuses() {
        for (bad, why) in [
            (TOY.replace("-0.1\t<s> a", "0.1\t<s> a"), "positive"),
            (TOY.replace("a </s>\t0", "a </s>\t-1"), "non-zero backoff"),
            (TOY.replace("ngram 2=2", "ngram 2=3"), "fewer"),
            (TOY.replace("ngram 1=3", "ngram 1=2"), "expected \\2-grams:"),
            (TOY.replace("\\end\\", ""), "without \\end\\"),
            (TOY.replace("ngram 2=2", "ngram 3=2"), "consecutive"),
        ] {
            let e = parse(&bad)
                .err()
                .unwrap_or_else(|| panic!("{why}: accepted"));
            assert!(e.to_string().contains(why), "{why}: {e}");
        }
    }

    #[test]
    fn writes_what_it_reads() {
        let mut out = Vec::new();
        write(&mut out, &[2, 1], |n, out| {
            if n == 1 {
                write_entry(out, -0.30103, ["<s>"], Some(-0.1))?;
                write_entry(out, 0.0, ["a"], Some(0.0))
            } else {
                write_entry(out, -1.0e-8, ["<s>", "a"], None)
            }
        })
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        let c = parse(&text).unwrap();
        assert_eq!(c.entries[0].1, -0.30103f32);
        assert_eq!(c.entries[2].1, -1.0e-8f32);
        assert!(text.starts_with("\\data\\\nngram 1=2\nngram 2=1\n\n\\1-grams:\n"));
    }
}
