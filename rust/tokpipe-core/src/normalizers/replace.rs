//! HF's `Replace` normalizer (and decoder step): every match of a literal string or a regex
//! replaced by a fixed string. HF compiles patterns with Oniguruma; the patterns its
//! sentencepiece converters write (` {2,}`, `\A +| +\z`, `\A▁`, literals) mean the same in the
//! `regex` crate, which is tried first; `fancy-regex` takes patterns with look-arounds.
//!
//! Those converter patterns run on every encode of a `tokenizer.json` Unigram, so the shapes
//! they take (a literal, a greedy run of one character, leading/trailing runs, a literal at the
//! start) are recognised from the regex's syntax tree and matched by plain scans that find
//! exactly the regex's matches ([`Fast`]); any other pattern goes through the regex.

use std::borrow::Cow;

use memchr::memmem::Finder;
use regex_syntax::hir::{Hir, HirKind, Look};

/// What a `Replace` looks for, as `tokenizer.json` spells it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplacePattern {
    String(String),
    Regex(String),
}

#[derive(Clone, Debug)]
enum Engine {
    Plain(regex::Regex),
    Fancy(fancy_regex::Regex),
}

/// A pattern whose leftmost-first, non-overlapping matches a scan finds without the regex.
#[derive(Clone, Debug)]
enum Fast {
    /// A non-empty literal (`memmem`'s occurrences are leftmost and non-overlapping, as the
    /// regex's matches are).
    Literal(Finder<'static>),
    /// `c{min,}`, greedy, `min >= 1`: every maximal run of `c` at least `min` long (a run
    /// shorter than `min` holds no match at any of its positions). `first` finds `c` repeated
    /// `min` times: after a run's end its first occurrence is where the next such run starts.
    Run { ch: char, first: Finder<'static> },
    /// `\A c+`, `c+\z` or `\A c+|c+\z` (either order: both alternatives span the same run
    /// when they meet at the start): the leading run, then the trailing run left after it.
    Ends { ch: char, start: bool, end: bool },
    /// `\A` then a non-empty literal.
    Prefix(String),
}

impl Fast {
    /// The fast form of a regex, when its syntax tree has one of the shapes above.
    fn from_regex(source: &str) -> Option<Fast> {
        let hir = regex_syntax::Parser::new().parse(source).ok()?;
        if let Some(lit) = literal(&hir) {
            return Some(Fast::literal(&lit));
        }
        if let Some((ch, min)) = run(&hir) {
            let first = Finder::new(ch.to_string().repeat(min).as_bytes()).into_owned();
            return Some(Fast::Run { ch, first });
        }
        let anchored_run = |h: &Hir| -> Option<(char, bool)> {
            let HirKind::Concat(parts) = h.kind() else {
                return None;
            };
            match parts.as_slice() {
                [a, r] if is_look(a, Look::Start) => {
                    run(r).filter(|&(_, m)| m == 1).map(|(c, _)| (c, true))
                }
                [r, z] if is_look(z, Look::End) => {
                    run(r).filter(|&(_, m)| m == 1).map(|(c, _)| (c, false))
                }
                _ => None,
            }
        };
        match hir.kind() {
            HirKind::Concat(parts) => match parts.as_slice() {
                [a, rest] if is_look(a, Look::Start) => {
                    if let Some(lit) = literal(rest) {
                        return Some(Fast::Prefix(lit));
                    }
                }
                _ => {}
            },
            HirKind::Alternation(alts) => {
                if let [x, y] = alts.as_slice() {
                    let ((cx, sx), (cy, sy)) = (anchored_run(x)?, anchored_run(y)?);
                    if cx == cy && sx != sy {
                        return Some(Fast::Ends {
                            ch: cx,
                            start: true,
                            end: true,
                        });
                    }
                }
                return None;
            }
            _ => {}
        }
        anchored_run(&hir).map(|(ch, start)| Fast::Ends {
            ch,
            start,
            end: !start,
        })
    }

    fn literal(lit: &str) -> Fast {
        Fast::Literal(Finder::new(lit.as_bytes()).into_owned())
    }

    /// `found(start, end)` for every match, in order (the regex's leftmost-first matches).
    fn each_match(&self, text: &str, mut found: impl FnMut(usize, usize)) {
        match self {
            Fast::Literal(lit) => match lit.needle() {
                // One byte (a space, in the converters' `" "` -> `"▁"`): in prose it recurs
                // every few bytes, where a plain loop beats a `memchr` call per occurrence.
                &[byte] => {
                    for (i, _) in text.bytes().enumerate().filter(|&(_, b)| b == byte) {
                        found(i, i + 1);
                    }
                }
                needle => {
                    for i in lit.find_iter(text.as_bytes()) {
                        found(i, i + needle.len());
                    }
                }
            },
            Fast::Run { ch, first } => {
                let mut from = 0;
                while let Some(i) = first.find(&text.as_bytes()[from..]) {
                    let start = from + i;
                    let tail = &text[start + first.needle().len()..];
                    let end = text.len() - tail.trim_start_matches(*ch).len();
                    found(start, end);
                    from = end;
                }
            }
            Fast::Ends { ch, start, end } => {
                let lead = text.len() - text.trim_start_matches(*ch).len();
                let mut taken = 0;
                if *start && lead > 0 {
                    found(0, lead);
                    taken = lead;
                }
                if *end {
                    let trail_start = text.trim_end_matches(*ch).len().max(taken);
                    if trail_start < text.len() {
                        found(trail_start, text.len());
                    }
                }
            }
            Fast::Prefix(lit) => {
                if text.starts_with(lit.as_str()) {
                    found(0, lit.len());
                }
            }
        }
    }
}

fn is_look(h: &Hir, look: Look) -> bool {
    matches!(h.kind(), HirKind::Look(l) if *l == look)
}

/// The text of a non-empty literal node.
fn literal(h: &Hir) -> Option<String> {
    match h.kind() {
        HirKind::Literal(lit) if !lit.0.is_empty() => {
            std::str::from_utf8(&lit.0).ok().map(str::to_string)
        }
        _ => None,
    }
}

/// `(c, min)` of a greedy, unbounded repetition of one character at least once.
fn run(h: &Hir) -> Option<(char, usize)> {
    let HirKind::Repetition(rep) = h.kind() else {
        return None;
    };
    if !rep.greedy || rep.max.is_some() || rep.min == 0 {
        return None;
    }
    let lit = literal(&rep.sub)?;
    let mut chars = lit.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) => Some((c, rep.min as usize)),
        _ => None,
    }
}

#[derive(Clone, Debug)]
pub struct Replace {
    pattern: ReplacePattern,
    content: String,
    engine: Engine,
    /// The same matches as `engine`'s, found by a scan (None: the regex is used).
    fast: Option<Fast>,
}

impl Replace {
    pub fn new(pattern: ReplacePattern, content: impl Into<String>) -> Result<Self, String> {
        let source = match &pattern {
            ReplacePattern::String(s) => regex::escape(s),
            ReplacePattern::Regex(r) => r.clone(),
        };
        let engine = match regex::Regex::new(&source) {
            Ok(re) => Engine::Plain(re),
            Err(_) => Engine::Fancy(
                fancy_regex::Regex::new(&source)
                    .map_err(|e| format!("Replace pattern {source:?}: {e}"))?,
            ),
        };
        let fast = match (&pattern, &engine) {
            (ReplacePattern::String(s), _) if !s.is_empty() => Some(Fast::literal(s)),
            (ReplacePattern::Regex(r), Engine::Plain(_)) => Fast::from_regex(r),
            _ => None,
        };
        Ok(Replace {
            pattern,
            content: content.into(),
            engine,
            fast,
        })
    }

    /// This pattern run through its regex only: the tests' reference for the fast path.
    #[cfg(test)]
    fn regex_only(&self) -> Replace {
        Replace {
            fast: None,
            ..self.clone()
        }
    }

    pub fn pattern(&self) -> &ReplacePattern {
        &self.pattern
    }

    pub fn content(&self) -> &str {
        &self.content
    }

    /// The (start, end) of every match, in order.
    pub fn matches(&self, text: &str) -> Vec<(usize, usize)> {
        if let Some(fast) = &self.fast {
            let mut found = Vec::new();
            fast.each_match(text, |start, end| found.push((start, end)));
            return found;
        }
        match &self.engine {
            Engine::Plain(re) => re.find_iter(text).map(|m| (m.start(), m.end())).collect(),
            Engine::Fancy(re) => re
                .find_iter(text)
                .map_while(Result::ok)
                .map(|m| (m.start(), m.end()))
                .collect(),
        }
    }

    /// `text` with every match replaced; borrowed when nothing matches.
    pub fn apply<'a>(&self, text: &'a str) -> Cow<'a, str> {
        if let Some(fast) = &self.fast {
            let mut out: Option<String> = None;
            let mut last = 0;
            fast.each_match(text, |start, end| {
                // Room for a `▁` per space of prose, allocated once.
                let out = out.get_or_insert_with(|| String::with_capacity(text.len() * 3 / 2));
                out.push_str(&text[last..start]);
                out.push_str(&self.content);
                last = end;
            });
            return match out {
                None => Cow::Borrowed(text),
                Some(mut out) => {
                    out.push_str(&text[last..]);
                    Cow::Owned(out)
                }
            };
        }
        match &self.engine {
            Engine::Plain(re) => re.replace_all(text, regex::NoExpand(&self.content)),
            Engine::Fancy(re) => {
                let mut out = String::new();
                let mut last = 0;
                // A match that fails (backtracking limit) ends the replacing: what is left is
                // kept as it is.
                for m in re.find_iter(text).map_while(Result::ok) {
                    out.push_str(&text[last..m.start()]);
                    out.push_str(&self.content);
                    last = m.end();
                }
                if last == 0 && out.is_empty() {
                    return Cow::Borrowed(text);
                }
                out.push_str(&text[last..]);
                Cow::Owned(out)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_and_regexes_replace_every_match() {
        let r = Replace::new(ReplacePattern::Regex(" {2,}".into()), " ").unwrap();
        assert_eq!(r.apply("a  b   c d"), "a b c d");
        assert!(matches!(r.apply("a b"), Cow::Borrowed(_)));
        let r = Replace::new(ReplacePattern::String(" ".into()), "▁").unwrap();
        assert_eq!(r.apply(" a b"), "▁a▁b");
        let r = Replace::new(ReplacePattern::Regex(r"\A +| +\z".into()), "").unwrap();
        assert_eq!(r.apply("  a b  "), "a b");
        let r = Replace::new(ReplacePattern::String("$1.".into()), "x").unwrap();
        assert_eq!(r.apply("a$1.b"), "axb");
        let r = Replace::new(ReplacePattern::Regex(r"a(?=b)".into()), "$0").unwrap();
        assert_eq!(r.apply("abac"), "$0bac");
        assert!(Replace::new(ReplacePattern::Regex("(".into()), "").is_err());
    }

    /// Patterns with a fast form, and neighbours of them that must keep the regex.
    const FAST: [&str; 14] = [
        " {2,}",
        r"\A +| +\z",
        r" +\z|\A +",
        r"\A +",
        r" +\z",
        r"\A▁",
        r"\A\t\t",
        " ",
        "▁",
        "  ",
        "\u{a0}{2,}",
        r"\t+",
        "a{3,}",
        "x{1,}",
    ];
    const SLOW: [&str; 9] = [
        " {2,}?",
        " {2,5}",
        " *",
        r"\s{2,}",
        "(?:ab){2,}",
        r"\A +|\t+\z",
        r"\A {2,}",
        "[ ]{2,}|x",
        r"(?m)^ +",
    ];

    fn replace(pattern: &str, content: &str) -> Replace {
        Replace::new(ReplacePattern::Regex(pattern.into()), content).unwrap()
    }

    /// The fast path's matches and output against the regex's, for every pattern and content.
    fn assert_same_as_regex(texts: impl IntoIterator<Item = String>) {
        let mut all: Vec<Replace> = FAST
            .iter()
            .chain(SLOW.iter())
            .flat_map(|p| ["", " ", "▁▁"].map(|c| replace(p, c)))
            .collect();
        for lit in [" ", "▁", "  ", "a\t"] {
            all.push(Replace::new(ReplacePattern::String(lit.into()), "▁").unwrap());
        }
        let reference: Vec<Replace> = all.iter().map(Replace::regex_only).collect();
        for text in texts {
            for (r, re) in all.iter().zip(&reference) {
                assert_eq!(
                    r.matches(&text),
                    re.matches(&text),
                    "{:?} on {text:?}",
                    r.pattern
                );
                assert_eq!(
                    r.apply(&text),
                    re.apply(&text),
                    "{:?} on {text:?}",
                    r.pattern
                );
            }
        }
    }

    #[test]
    fn converter_patterns_take_the_fast_path() {
        for p in FAST {
            assert!(replace(p, " ").fast.is_some(), "{p}");
        }
        for p in SLOW {
            assert!(replace(p, " ").fast.is_none(), "{p}");
        }
        assert!(Replace::new(ReplacePattern::String("".into()), "x")
            .unwrap()
            .fast
            .is_none());
    }

    #[test]
    fn fast_path_equals_the_regex_on_every_short_string() {
        // Every string of up to 6 characters over spaces, tab, NBSP, `▁` and a letter: runs
        // of each length, at the start, the end, alone and mixed; the empty string too.
        let alphabet = [' ', '\t', '\u{a0}', '▁', 'a'];
        let mut texts = vec![String::new()];
        let mut level = vec![String::new()];
        for _ in 0..6 {
            level = level
                .iter()
                .flat_map(|t| alphabet.iter().map(move |c| format!("{t}{c}")))
                .collect();
            texts.extend(level.iter().cloned());
        }
        assert_same_as_regex(texts);
    }

    #[test]
    fn fast_path_equals_the_regex_on_random_and_real_text() {
        let alphabet = [
            ' ', ' ', ' ', '\t', '\n', '\u{a0}', '\u{3000}', '▁', 'a', 'x', 'é', '日',
        ];
        let mut rng = crate::util::SplitMix64::new(25);
        let random = (0..3000).map(|_| {
            let len = (rng.next_u64() % 40) as usize;
            (0..len)
                .map(|_| alphabet[(rng.next_u64() % alphabet.len() as u64) as usize])
                .collect()
        });
        assert_same_as_regex(random.collect::<Vec<String>>());
        for name in [
            "botchan.txt",
            "tinyshakespeare.txt",
            "wagahaiwa_nekodearu.txt",
        ] {
            let text = crate::util::shared_text(name);
            // The whole text, its lines (each with its own start and end), and its paragraphs
            // with the line breaks turned into runs of spaces.
            let mut texts: Vec<String> = text.lines().take(3000).map(str::to_string).collect();
            texts.extend(text.split("\n\n").take(500).map(|p| p.replace('\n', "   ")));
            texts.push(text);
            assert_same_as_regex(texts);
        }
    }
}
