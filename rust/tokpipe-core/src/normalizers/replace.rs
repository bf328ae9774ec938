//! HF's `Replace` normalizer (and decoder step): every match of a literal string or a regex
//! replaced by a fixed string. HF compiles patterns with Oniguruma; the patterns its
//! sentencepiece converters write (` {2,}`, `\A +| +\z`, `\A▁`, literals) mean the same in the
//! `regex` crate, which is tried first; `fancy-regex` takes patterns with look-arounds.

use std::borrow::Cow;

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

#[derive(Clone, Debug)]
pub struct Replace {
    pattern: ReplacePattern,
    content: String,
    engine: Engine,
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
        Ok(Replace {
            pattern,
            content: content.into(),
            engine,
        })
    }

    pub fn pattern(&self) -> &ReplacePattern {
        &self.pattern
    }

    pub fn content(&self) -> &str {
        &self.content
    }

    /// The (start, end) of every match, in order.
    pub fn matches(&self, text: &str) -> Vec<(usize, usize)> {
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
}
