//! The `url_filter` stage's rules: domain block and allow lists, exact URLs, regexes and
//! datatrove's banned-word rules, decided for a whole Arrow column of URLs at once.
//!
//! Domain lists hold millions of entries (5M in the lists crawls use), so an entry is kept
//! as the 64-bit xxh3 hash of its normalised name in one sorted `Vec<u64>`: 8 bytes an entry,
//! no strings, loaded with one sort. A host matches when it, or any parent domain of it
//! (each suffix that starts after a `.`: `a.b.example.com`, `b.example.com`, `example.com`,
//! `com`), is in the list. Two different names share a hash with probability about
//! entries / 2^64 per lookup (3e-13 for 5M entries): a false block is that rare.
//!
//! The word rules are datatrove's `URLFilter`'s: the URL is cut into words at every run of
//! characters other than ASCII letters and digits (the words keep their case, as datatrove's
//! do), list entries are normalised as datatrove normalises them (those characters removed,
//! lower-cased); a banned subword is looked for in the URL with those characters removed and
//! lower-cased.
//!
//! (Over 500 lines: about 80 of them are unit tests; the rest is one rule set, its loading and
//! its per-column decision.)

use crate::error::{shown, Error, Result};
use aho_corasick::AhoCorasick;
use rayon::prelude::*;
use regex::RegexSet;
use rustc_hash::{FxHashMap, FxHashSet};
use std::borrow::Cow;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use xxhash_rust::xxh3::xxh3_64;

use super::StrColumn;

/// What the rules decided for one URL. The numbers are the binding's layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum UrlVerdict {
    Keep = 0,
    /// Null or empty (after trimming).
    Missing = 1,
    /// No host can be read from it (none, or one with characters a host cannot hold).
    Invalid = 2,
    BlockedDomain = 3,
    BlockedUrl = 4,
    BlockedPattern = 5,
    BannedWord = 6,
    SoftBannedWords = 7,
    BannedSubword = 8,
    /// A rule would drop it, but its domain is on the allow list.
    Allowed = 9,
}

/// A set of domains as sorted hashes of their normalised names, with an index of where each
/// value of the hashes' top bits starts: a lookup reads one index entry and a run of about four
/// hashes (one or two cache misses) instead of binary-searching millions. The index costs 1
/// byte an entry (a `u32` per four).
#[derive(Default)]
pub struct DomainSet {
    hashes: Vec<u64>,
    /// `starts[b]..starts[b + 1]`: the hashes whose top `64 - shift` bits are `b`.
    starts: Vec<u32>,
    shift: u32,
}

/// A list entry as it is matched: trimmed, lower-cased, without a leading `*.` or `.` and a
/// trailing `.`; None for a blank line or a `#` comment.
fn normalize_domain(line: &str) -> Option<String> {
    let entry = line.trim();
    if entry.is_empty() || entry.starts_with('#') {
        return None;
    }
    let entry = entry.strip_prefix("*.").unwrap_or(entry);
    let entry = entry.trim_start_matches('.').trim_end_matches('.');
    (!entry.is_empty()).then(|| entry.to_lowercase())
}

/// Calls `each` with every line of a list file (gzip when its name ends in `.gz`).
fn for_each_line(path: &Path, mut each: impl FnMut(&str)) -> Result<()> {
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let reader: Box<dyn Read> = if path.extension().is_some_and(|e| e == "gz") {
        Box::new(flate2::read::MultiGzDecoder::new(file))
    } else {
        Box::new(file)
    };
    let mut reader = BufReader::with_capacity(1 << 20, reader);
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| Error::io(path, e))?;
        if n == 0 {
            return Ok(());
        }
        // A list is text; a stray non-UTF-8 byte spoils that entry alone.
        each(&String::from_utf8_lossy(&line));
    }
}

impl DomainSet {
    /// The domains of `entries` and of the list files `paths` (one a line, `#` comments).
    pub fn load(paths: &[impl AsRef<Path>], entries: &[String]) -> Result<Self> {
        let mut hashes: Vec<u64> = entries
            .iter()
            .filter_map(|e| normalize_domain(e))
            .map(|d| xxh3_64(d.as_bytes()))
            .collect();
        for path in paths {
            for_each_line(path.as_ref(), |line| {
                if let Some(d) = normalize_domain(line) {
                    hashes.push(xxh3_64(d.as_bytes()));
                }
            })?;
        }
        hashes.sort_unstable();
        hashes.dedup();
        hashes.shrink_to_fit();
        if u32::try_from(hashes.len()).is_err() {
            return Err(Error::InvalidArgument(format!(
                "a domain list holds {} entries, more than 2^32",
                hashes.len()
            )));
        }
        let bits = (hashes.len() / 4).max(2).ilog2();
        let shift = 64 - bits;
        let mut starts = Vec::with_capacity((1usize << bits) + 1);
        let mut next = 0usize;
        for bucket in 0..(1u64 << bits) {
            while next < hashes.len() && (hashes[next] >> shift) < bucket {
                next += 1;
            }
            starts.push(next as u32);
        }
        starts.push(hashes.len() as u32);
        Ok(DomainSet {
            hashes,
            starts,
            shift,
        })
    }

    fn contains_hash(&self, hash: u64) -> bool {
        let bucket = (hash >> self.shift) as usize;
        let run = &self.hashes[self.starts[bucket] as usize..self.starts[bucket + 1] as usize];
        run.contains(&hash)
    }

    pub fn len(&self) -> usize {
        self.hashes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    /// Whether `host` (lower-cased, no trailing dot) or a parent domain of it is in the set.
    pub fn matches_host(&self, host: &str) -> bool {
        if self.hashes.is_empty() {
            return false;
        }
        let mut suffix = host;
        loop {
            if self.contains_hash(xxh3_64(suffix.as_bytes())) {
                return true;
            }
            match suffix.find('.') {
                Some(dot) => suffix = &suffix[dot + 1..],
                None => return false,
            }
        }
    }
}

/// The host of `url`, lower-cased, without port, user info or trailing dot: what follows the
/// scheme's `://` (or a leading `//`; a URL without either is read from its start, as
/// `example.com/page`) up to the first `/`, `?` or `#`. None when there is none, or when it
/// holds a character no host holds (a space, `<`, ...); an IPv6 literal `[...]` is kept
/// whole.
pub fn url_host(url: &str) -> Option<Cow<'_, str>> {
    // Bytes, not chars: every delimiter is ASCII, and this runs once per document.
    let url = url.trim();
    let bytes = url.as_bytes();
    let scheme = bytes
        .iter()
        .position(|b| !(b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.')))
        .unwrap_or(bytes.len());
    let start =
        if scheme > 0 && bytes[0].is_ascii_alphabetic() && bytes[scheme..].starts_with(b"://") {
            scheme + 3
        } else if bytes.starts_with(b"//") {
            2
        } else {
            0
        };
    let rest = &bytes[start..];
    let authority = &rest[..memchr::memchr3(b'/', b'?', b'#', rest).unwrap_or(rest.len())];
    let host_port = memchr::memrchr(b'@', authority).map_or(authority, |at| &authority[at + 1..]);
    let bracketed = host_port.first() == Some(&b'[');
    let host_end = if bracketed {
        memchr::memchr(b']', host_port).map_or(host_port.len(), |i| i + 1)
    } else {
        memchr::memchr(b':', host_port).unwrap_or(host_port.len())
    };
    let mut host = &host_port[..host_end];
    while let [rest @ .., b'.'] = host {
        host = rest;
    }
    let (mut valid, mut lower) = (!host.is_empty(), true);
    for &b in host {
        valid &= b >= 0x80
            || b.is_ascii_alphanumeric()
            || matches!(b, b'-' | b'.' | b'_')
            || (bracketed && matches!(b, b'[' | b']' | b':'));
        lower &= !(b.is_ascii_uppercase() || b >= 0x80);
    }
    if !valid {
        return None;
    }
    // The host lies between ASCII delimiters of a str, so it is whole UTF-8.
    let offset = host.as_ptr() as usize - url.as_ptr() as usize;
    let host = &url[offset..offset + host.len()];
    // Most hosts are lower-case already: no copy for them.
    Some(if lower {
        Cow::Borrowed(host)
    } else {
        Cow::Owned(host.to_lowercase())
    })
}

/// The value of a banned word in `UrlRules::listed_words`.
const BANNED: u32 = u32::MAX;

/// Each byte as datatrove's `normalize` keeps it: an ASCII letter lower-cased, a digit as
/// it is, anything else 0 (dropped).
const NORMALIZED: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        if c.is_ascii_alphanumeric() {
            table[b] = c.to_ascii_lowercase();
        }
        b += 1;
    }
    table
};

/// datatrove's `normalize`: ASCII letters and digits only, lower-cased.
fn normalize_word(s: &str) -> String {
    s.bytes()
        .filter(u8::is_ascii_alphanumeric)
        .map(|b| b.to_ascii_lowercase() as char)
        .collect()
}

/// Every list and rule of one `url_filter` stage, built once.
pub struct UrlRules {
    pub block_domains: DomainSet,
    pub allow_domains: DomainSet,
    /// Exact URLs (trimmed), as hashes.
    block_urls: FxHashSet<u64>,
    patterns: Option<RegexSet>,
    /// Each listed word: [`BANNED`] for a banned one (which wins over soft), else its number
    /// among the soft-banned words, to count distinct ones.
    listed_words: FxHashMap<Vec<u8>, u32>,
    /// Bit `min(n, 63)` is set when a listed word has `n` bytes: most words of a URL are
    /// passed over on their length alone, without hashing them.
    word_lengths: u64,
    soft_words: usize,
    soft_word_threshold: usize,
    banned_subwords: Option<AhoCorasick>,
}

/// The lists a [`UrlRules`] is built from; each `*_files` adds the lines of its files.
#[derive(Default)]
pub struct UrlLists {
    pub block_domains: Vec<String>,
    pub block_domain_files: Vec<String>,
    pub allow_domains: Vec<String>,
    pub allow_domain_files: Vec<String>,
    pub block_urls: Vec<String>,
    pub block_url_files: Vec<String>,
    pub block_url_patterns: Vec<String>,
    pub banned_words: Vec<String>,
    pub banned_subwords: Vec<String>,
    pub soft_banned_words: Vec<String>,
    pub soft_word_threshold: usize,
}

/// The distinct normalised words of a word list (`#` comments and empty ones left out).
fn words(entries: &[String]) -> Vec<String> {
    let mut words: Vec<String> = entries
        .iter()
        .filter(|e| !e.trim_start().starts_with('#'))
        .map(|e| normalize_word(e))
        .filter(|w| !w.is_empty())
        .collect();
    words.sort_unstable();
    words.dedup();
    words
}

/// What one URL's check needs besides the rules, reused from URL to URL.
#[derive(Default)]
pub struct UrlScratch {
    normalized: Vec<u8>,
    soft_seen: Vec<u32>,
}

impl UrlRules {
    pub fn new(lists: &UrlLists) -> Result<Self> {
        let block_domains = DomainSet::load(&lists.block_domain_files, &lists.block_domains)?;
        let allow_domains = DomainSet::load(&lists.allow_domain_files, &lists.allow_domains)?;
        let mut block_urls: FxHashSet<u64> = FxHashSet::default();
        let mut add_url = |line: &str| {
            let url = line.trim();
            if !url.is_empty() && !url.starts_with('#') {
                block_urls.insert(xxh3_64(url.as_bytes()));
            }
        };
        lists.block_urls.iter().for_each(|u| add_url(u));
        for path in &lists.block_url_files {
            for_each_line(Path::new(path), &mut add_url)?;
        }
        let patterns = if lists.block_url_patterns.is_empty() {
            None
        } else {
            // Checked one by one so the error names the pattern that does not compile.
            for p in &lists.block_url_patterns {
                regex::Regex::new(p).map_err(|e| {
                    Error::InvalidArgument(format!(
                        "block_url_patterns: {} does not compile: {}",
                        shown(p),
                        e.to_string().lines().last().unwrap_or_default()
                    ))
                })?;
            }
            Some(RegexSet::new(&lists.block_url_patterns).map_err(|e| {
                Error::InvalidArgument(format!("block_url_patterns: {}", shown(&e.to_string())))
            })?)
        };
        let subwords = words(&lists.banned_subwords);
        let banned_subwords = if subwords.is_empty() {
            None
        } else {
            Some(AhoCorasick::new(&subwords).map_err(|e| {
                Error::InvalidArgument(format!("banned_subwords: cannot build the automaton: {e}"))
            })?)
        };
        let mut listed_words: FxHashMap<Vec<u8>, u32> = FxHashMap::default();
        let soft = words(&lists.soft_banned_words);
        let soft_words = soft.len();
        for (word, i) in soft.into_iter().zip(0..) {
            listed_words.insert(word.into_bytes(), i);
        }
        for word in words(&lists.banned_words) {
            listed_words.insert(word.into_bytes(), BANNED);
        }
        let word_lengths = listed_words
            .keys()
            .fold(0u64, |bits, w| bits | 1 << w.len().min(63));
        Ok(UrlRules {
            block_domains,
            allow_domains,
            block_urls,
            patterns,
            listed_words,
            word_lengths,
            soft_words,
            soft_word_threshold: lists.soft_word_threshold,
            banned_subwords,
        })
    }

    /// The first rule `url` fails, in datatrove's order (domain, exact URL, then our
    /// regexes, banned words, soft-banned words, banned subwords), or Keep.
    fn first_failure(&self, url: &str, host: &str, scratch: &mut UrlScratch) -> UrlVerdict {
        if self.block_domains.matches_host(host) {
            return UrlVerdict::BlockedDomain;
        }
        if !self.block_urls.is_empty() && self.block_urls.contains(&xxh3_64(url.as_bytes())) {
            return UrlVerdict::BlockedUrl;
        }
        if self.patterns.as_ref().is_some_and(|p| p.is_match(url)) {
            return UrlVerdict::BlockedPattern;
        }
        let check_words = self.word_lengths != 0;
        let normalize = self.banned_subwords.is_some();
        if !check_words && !normalize {
            return UrlVerdict::Keep;
        }
        // One pass over the URL's runs of ASCII letters and digits: they are its words, and,
        // lower-cased end to end, its normalised form. A banned word decides at once (datatrove
        // checks banned words before soft ones, and both before subwords).
        scratch.soft_seen.clear();
        scratch.normalized.clear();
        let bytes = url.as_bytes();
        let mut at = 0;
        while at < bytes.len() {
            if NORMALIZED[bytes[at] as usize] == 0 {
                at += 1;
                continue;
            }
            let start = at;
            while at < bytes.len() && NORMALIZED[bytes[at] as usize] != 0 {
                at += 1;
            }
            let word = &bytes[start..at];
            if check_words && self.word_lengths >> word.len().min(63) & 1 != 0 {
                match self.listed_words.get(word) {
                    Some(&BANNED) => return UrlVerdict::BannedWord,
                    Some(&i) => scratch.soft_seen.push(i),
                    None => {}
                }
            }
            if normalize {
                scratch.normalized.extend_from_slice(word);
            }
        }
        if self.soft_words > 0 && !scratch.soft_seen.is_empty() {
            scratch.soft_seen.sort_unstable();
            scratch.soft_seen.dedup();
            if scratch.soft_seen.len() >= self.soft_word_threshold {
                return UrlVerdict::SoftBannedWords;
            }
        }
        if let Some(ac) = &self.banned_subwords {
            scratch.normalized.make_ascii_lowercase();
            if ac.is_match(scratch.normalized.as_slice()) {
                return UrlVerdict::BannedSubword;
            }
        }
        UrlVerdict::Keep
    }

    /// The verdict on one URL: missing or invalid first, then the rules; a URL a rule would
    /// drop whose domain is on the allow list is `Allowed` (kept).
    pub fn decide(&self, url: &str, scratch: &mut UrlScratch) -> UrlVerdict {
        let url = url.trim();
        if url.is_empty() {
            return UrlVerdict::Missing;
        }
        let Some(host) = url_host(url) else {
            return UrlVerdict::Invalid;
        };
        match self.first_failure(url, &host, scratch) {
            UrlVerdict::Keep => UrlVerdict::Keep,
            _ if self.allow_domains.matches_host(&host) => UrlVerdict::Allowed,
            failed => failed,
        }
    }

    /// The verdict on every row of `column`, on all cores.
    pub fn decide_column(&self, column: &StrColumn<'_>) -> Vec<UrlVerdict> {
        (0..column.len())
            .into_par_iter()
            .with_min_len(1024)
            .map_init(UrlScratch::default, |scratch, i| {
                self.decide(column.get(i), scratch)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(lists: UrlLists) -> UrlRules {
        UrlRules::new(&lists).unwrap()
    }

    #[test]
    fn hosts() {
        assert_eq!(
            url_host("https://User@Www.Example.COM.:8080/a?b#c").as_deref(),
            Some("www.example.com")
        );
        assert_eq!(url_host("example.com/page").as_deref(), Some("example.com"));
        assert_eq!(
            url_host("//cdn.example.org").as_deref(),
            Some("cdn.example.org")
        );
        assert_eq!(url_host("http://[::1]:80/").as_deref(), Some("[::1]"));
        assert_eq!(url_host("http:///path"), None);
        assert_eq!(url_host("not a url"), None);
    }

    #[test]
    fn parents_match_children_do_not() {
        let set = DomainSet::load(
            &[] as &[&str],
            &["Example.com.".into(), "# c".into(), "*.x.org".into()],
        )
        .unwrap();
        assert_eq!(set.len(), 2);
        assert!(set.matches_host("a.b.example.com"));
        assert!(set.matches_host("example.com"));
        assert!(!set.matches_host("notexample.com"));
        assert!(!set.matches_host("com"));
        assert!(set.matches_host("y.x.org"));
    }

    #[test]
    fn allow_wins_and_order() {
        let r = rules(UrlLists {
            block_domains: vec!["bad.com".into()],
            allow_domains: vec!["ok.bad.com".into()],
            banned_words: vec!["Porn".into()],
            soft_banned_words: vec!["sex".into(), "hot".into()],
            soft_word_threshold: 2,
            banned_subwords: vec!["xxx".into()],
            block_url_patterns: vec![r"/ads/".into()],
            ..Default::default()
        });
        let mut s = UrlScratch::default();
        assert_eq!(
            r.decide("http://x.bad.com/", &mut s),
            UrlVerdict::BlockedDomain
        );
        assert_eq!(r.decide("http://ok.bad.com/", &mut s), UrlVerdict::Allowed);
        assert_eq!(
            r.decide("http://a.com/ads/1", &mut s),
            UrlVerdict::BlockedPattern
        );
        assert_eq!(
            r.decide("http://a.com/porn", &mut s),
            UrlVerdict::BannedWord
        );
        // Words keep their case, as datatrove's do.
        assert_eq!(r.decide("http://a.com/PORN", &mut s), UrlVerdict::Keep);
        assert_eq!(
            r.decide("http://a.com/hot-sex", &mut s),
            UrlVerdict::SoftBannedWords
        );
        assert_eq!(r.decide("http://a.com/sex-sex", &mut s), UrlVerdict::Keep);
        assert_eq!(
            r.decide("http://a.com/X-X-X", &mut s),
            UrlVerdict::BannedSubword
        );
        assert_eq!(r.decide("  ", &mut s), UrlVerdict::Missing);
        assert_eq!(r.decide("http://", &mut s), UrlVerdict::Invalid);
    }
}
