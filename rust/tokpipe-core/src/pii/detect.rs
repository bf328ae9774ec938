//! The detectors: where each kind of PII is in a text, as byte spans, before overlaps are
//! resolved. Every detector starts from a cheap trigger so that text without candidates costs
//! one pass: `@` (e-mail), `://` (URL credentials), `:` and `-` (IPv6, MAC), runs of digits
//! and `. - ( ) +` (phones, cards, IDs, SSNs, IPv4, IBAN check digits), the literal prefixes
//! of secrets (`AKIA`, `ghp_`, `glpat-`, `xox`, `eyJ`, `-----BEGIN`) and `=` / `:` after a
//! secret-like key. The `regex` crate has no look-around, so the context rules (word
//! boundaries, version strings, shell prompts, ...) are checked in code.
//!
//! (Over 500 lines: every detector, sharing the trigger helpers; the tests are in [`super`]. The
//! digit-cluster scan, which decides phones, cards, IDs, SSNs, IPv4 and IBANs together, is about
//! 470 of them and could be a module of its own.)

use super::validate::{
    card_iin, china_id_valid, iban_length, iban_valid, ipv4_public, ipv6_public, luhn, ssn_valid,
};
use super::PiiType;
use memchr::{memchr2_iter, memmem};
use regex::Regex;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::LazyLock;

/// A detection: `kind` at `text[start..end]` (bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawSpan {
    pub kind: PiiType,
    pub start: usize,
    pub end: usize,
}

/// Which detectors run, and how.
#[derive(Clone, Debug)]
pub struct DetectOptions {
    pub enabled: [bool; PiiType::COUNT],
    pub only_public_ip: bool,
}

impl Default for DetectOptions {
    fn default() -> Self {
        DetectOptions {
            enabled: [true; PiiType::COUNT],
            only_public_ip: false,
        }
    }
}

static EMAIL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"[A-Za-z0-9._%+'-]+@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24}",
    )
    .unwrap()
});

static URL_CREDENTIALS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"[A-Za-z][A-Za-z0-9+.-]{0,15}://([^\s:/?#@\[\]"'<>]+):([^\s/?#@"'<>]+)@"#).unwrap()
});

static SECRET: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}",
        r"|(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}",
        r"|github_pat_[A-Za-z0-9_]{22,255}",
        r"|glpat-[A-Za-z0-9_-]{20,}",
        r"|xox[baprs]-[A-Za-z0-9-]{10,}",
        r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
        r"|-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY-----(?s:.*?)-----END[A-Z0-9 ]{0,40}PRIVATE KEY-----",
    ))
    .unwrap()
});

/// The key of a secret assignment, ending where the value's separator starts.
static ASSIGNMENT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"(?i:api[_-]?key|api[_-]?secret|secret[_-]?key|access[_-]?key(?:[_-]?id)?|access[_-]?token",
        r"|auth[_-]?token|client[_-]?secret|private[_-]?key|password|passwd|pwd|secret|token)",
        r#"["']?[ \t]*(?:=>|:=|=|:)[ \t]*"#,
    ))
    .unwrap()
});

static PHONE_INTL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\+[1-9][0-9]{0,3}(?:[ .-]?(?:\([0-9]{1,4}\)|[0-9]{1,6})){1,6}").unwrap()
});

static PHONE_NANP_PAREN: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\([2-9][0-9]{2}\) ?[2-9][0-9]{2}[-.][0-9]{4}").unwrap());

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The byte before `i`, if any.
fn before(t: &[u8], i: usize) -> Option<u8> {
    i.checked_sub(1).map(|j| t[j])
}

/// Not glued to a word character on either side.
fn bounded(t: &[u8], start: usize, end: usize) -> bool {
    !before(t, start).is_some_and(is_word) && !t.get(end).copied().is_some_and(is_word)
}

/// Every detection of the enabled types in `text`, unordered, overlaps unresolved.
pub fn detect(text: &str, opts: &DetectOptions, out: &mut Vec<RawSpan>) {
    let t = text.as_bytes();
    let on = |k: PiiType| opts.enabled[k as usize];
    if on(PiiType::Email) && memchr::memchr(b'@', t).is_some() {
        emails(text, out);
    }
    if on(PiiType::UrlCredentials) && memmem::find(t, b"://").is_some() {
        url_credentials(text, out);
    }
    if on(PiiType::Secret) {
        secrets(text, out);
    }
    if on(PiiType::IpAddress) || on(PiiType::MacAddress) {
        colon_tokens(t, opts, out);
    }
    digit_clusters(text, opts, out);
}

const NOREPLY: [&str; 7] = [
    "noreply",
    "no-reply",
    "no_reply",
    "donotreply",
    "do-not-reply",
    "do_not_reply",
    "mailer-daemon",
];

const IMAGE_EXTENSIONS: [&str; 8] = ["png", "jpg", "jpeg", "gif", "svg", "webp", "bmp", "ico"];

fn emails(text: &str, out: &mut Vec<RawSpan>) {
    let t = text.as_bytes();
    for m in EMAIL.find_iter(text) {
        let (mut start, end) = (m.start(), m.end());
        // The local part may not start with a dot; a run of dots before it is punctuation.
        while t[start] == b'.' || t[start] == b'-' || t[start] == b'\'' {
            start += 1;
        }
        let at = start + text[start..end].find('@').unwrap_or(0);
        if start >= at || t[at - 1] == b'.' || text[start..at].contains("..") {
            continue;
        }
        if t.get(end)
            .is_some_and(|&b| is_word(b) || b == b'-' || b == b'@')
        {
            continue;
        }
        if before(t, start).is_some_and(|b| b == b'@' || is_word(b)) {
            continue;
        }
        // After `//` or `scheme:` it is a URL's user info (the url_credentials detector's), not
        // an address; `mailto:` is an address.
        if let Some(b) = before(t, start) {
            if (b == b'/' || b == b':')
                && !(start >= 7 && t[start - 7..start].eq_ignore_ascii_case(b"mailto:"))
            {
                continue;
            }
        }
        // Inside a URL's authority (`scheme://user:pa!ss@host`): the URL detector's. Looked
        // for in the 512 bytes before, so that many addresses cost no more than one pass.
        let lo = start.saturating_sub(512);
        let token_start = t[lo..start]
            .iter()
            .rposition(|&b| b.is_ascii_whitespace() || b == b'"' || b == b'<' || b == b'(')
            .map_or(lo, |p| lo + p + 1);
        if memmem::find(&t[token_start..start], b"://").is_some() {
            continue;
        }
        // `user@host.example.com:~$` (a shell prompt), `git@github.com:org/repo` (an SSH remote).
        if t.get(end) == Some(&b':')
            && t.get(end + 1)
                .is_some_and(|&b| b == b'~' || b == b'/' || b == b'$' || is_word(b))
        {
            continue;
        }
        let local = &text[start..at];
        let domain = &text[at + 1..end];
        // `git@` is a forge's SSH service account; the generic no-reply senders are no person.
        if local.eq_ignore_ascii_case("git")
            || NOREPLY.iter().any(|n| local.eq_ignore_ascii_case(n))
        {
            continue;
        }
        // `icon@2x.png`: an image's name, not an address.
        let tld = domain.rsplit('.').next().unwrap_or("");
        if IMAGE_EXTENSIONS.iter().any(|e| tld.eq_ignore_ascii_case(e)) {
            continue;
        }
        out.push(RawSpan {
            kind: PiiType::Email,
            start,
            end,
        });
    }
}

fn url_credentials(text: &str, out: &mut Vec<RawSpan>) {
    for caps in URL_CREDENTIALS.captures_iter(text) {
        let (user, pass) = (caps.get(1).unwrap(), caps.get(2).unwrap());
        // The span is the whole user info, `user:password`: the user name is often a person's.
        out.push(RawSpan {
            kind: PiiType::UrlCredentials,
            start: user.start(),
            end: pass.end(),
        });
    }
}

/// Values of `password = ...` that are placeholders or code, not secrets.
fn placeholder(v: &str) -> bool {
    const WORDS: [&str; 18] = [
        "none",
        "null",
        "nil",
        "true",
        "false",
        "undefined",
        "required",
        "optional",
        "string",
        "changeme",
        "password",
        "secret",
        "example",
        "redacted",
        "hidden",
        "xxxxxxxx",
        "your_password",
        "placeholder",
    ];
    let lower = v.to_ascii_lowercase();
    let first = v.as_bytes()[0];
    WORDS.contains(&lower.as_str())
        || lower.starts_with("your")
        || lower.starts_with("my_")
        || lower.starts_with("<")
        || matches!(
            first,
            b'$' | b'%' | b'{' | b'<' | b'[' | b'(' | b'*' | b'&' | b'@' | b'#'
        )
        || v.contains("(")
        || v.contains("{{")
        || v.contains("${")
        || lower.contains("env")
        || v.bytes().all(|b| b == v.as_bytes()[0])
        || v.bytes()
            .all(|b| b == b'x' || b == b'X' || b == b'*' || b == b'.')
}

fn assignment_value(t: &[u8], from: usize) -> Option<(usize, usize)> {
    let quote = *t.get(from)?;
    let (start, end) = if quote == b'"' || quote == b'\'' || quote == b'`' {
        let start = from + 1;
        let len = t[start..]
            .iter()
            .take(256)
            .position(|&b| b == quote || b == b'\n')?;
        if t[start + len] != quote {
            return None;
        }
        (start, start + len)
    } else {
        let len = t[from..]
            .iter()
            .take(256)
            .position(|&b| {
                b.is_ascii_whitespace()
                    || matches!(b, b',' | b';' | b')' | b']' | b'}' | b'"' | b'\'')
            })
            .unwrap_or(t.len() - from);
        (from, from + len)
    };
    let v = std::str::from_utf8(&t[start..end]).ok()?;
    let v = if quote == b'"' || quote == b'\'' || quote == b'`' {
        v
    } else {
        v.trim_end_matches(['.', ':'])
    };
    if v.len() < 6 || v.contains(char::is_whitespace) || placeholder(v) {
        return None;
    }
    // A secret mixes character classes; an unquoted value with one class of letters or digits
    // is prose ("password: required", "secret:--nurse").
    let classes = [
        v.bytes().any(|b| b.is_ascii_lowercase()),
        v.bytes().any(|b| b.is_ascii_uppercase()),
        v.bytes().any(|b| b.is_ascii_digit()),
    ]
    .iter()
    .filter(|&&c| c)
    .count();
    let quoted = start != from;
    // Unquoted, a leading dash is a command-line flag or a dash of prose.
    if !quoted && v.starts_with('-') {
        return None;
    }
    if classes < 2 && !(quoted && v.len() >= 8) {
        return None;
    }
    if !v.is_ascii() {
        return None;
    }
    Some((start, start + v.len()))
}

fn secrets(text: &str, out: &mut Vec<RawSpan>) {
    let t = text.as_bytes();
    for m in SECRET.find_iter(text) {
        let pem = t[m.start()] == b'-';
        if !pem && !bounded(t, m.start(), m.end()) {
            continue;
        }
        out.push(RawSpan {
            kind: PiiType::Secret,
            start: m.start(),
            end: m.end(),
        });
    }
    if memchr2_iter(b'=', b':', t).next().is_none() {
        return;
    }
    for m in ASSIGNMENT.find_iter(text) {
        if let Some((start, end)) = assignment_value(t, m.end()) {
            out.push(RawSpan {
                kind: PiiType::Secret,
                start,
                end,
            });
        }
    }
}

fn is_hex(b: u8) -> bool {
    b.is_ascii_hexdigit()
}

/// MAC addresses (six hex pairs separated all by `:` or all by `-`) and IPv6 addresses
/// (tokens of hex digits, `:` and `.` with at least two colons and a digit, that parse as
/// IPv6), found from each `:` and `-`.
fn colon_tokens(t: &[u8], opts: &DetectOptions, out: &mut Vec<RawSpan>) {
    let mac_on = opts.enabled[PiiType::MacAddress as usize];
    let ip_on = opts.enabled[PiiType::IpAddress as usize];
    let mut done = 0usize;
    for p in memchr2_iter(b':', b'-', t) {
        if p < done || p < 2 || !is_hex(t[p - 1]) {
            continue;
        }
        let sep = t[p];
        // MAC: hh?hh?hh?hh?hh?hh with ? the same separator; p is the first separator.
        if mac_on && p + 15 <= t.len() {
            let s = p - 2;
            let e = s + 17;
            let is_mac = e <= t.len()
                && (0..6).all(|g| is_hex(t[s + 3 * g]) && is_hex(t[s + 3 * g + 1]))
                && (0..5).all(|g| t[s + 3 * g + 2] == sep);
            if is_mac
                && bounded(t, s, e)
                && !before(t, s).is_some_and(|b| b == b':' || b == b'-')
                && !t
                    .get(e)
                    .is_some_and(|&b| b == sep && t.get(e + 1).is_some_and(|&c| is_hex(c)))
            {
                let all_same = t[s..e].iter().filter(|&&b| b != sep).all(|&b| b == b'0')
                    || t[s..e]
                        .iter()
                        .filter(|&&b| b != sep)
                        .all(|&b| b == b'f' || b == b'F');
                if !all_same {
                    out.push(RawSpan {
                        kind: PiiType::MacAddress,
                        start: s,
                        end: e,
                    });
                }
                done = e;
                continue;
            }
        }
        if !ip_on || sep != b':' {
            continue;
        }
        // IPv6: expand over hex digits, ':' and '.'.
        let mut s = p;
        while s > 0 && (is_hex(t[s - 1]) || t[s - 1] == b':' || t[s - 1] == b'.') {
            s -= 1;
        }
        let mut e = p + 1;
        while e < t.len() && (is_hex(t[e]) || t[e] == b':' || t[e] == b'.') {
            e += 1;
        }
        done = e;
        // Trailing sentence punctuation.
        while e > s && (t[e - 1] == b'.' || (t[e - 1] == b':' && !(e >= 2 && t[e - 2] == b':'))) {
            e -= 1;
        }
        while s < e && t[s] == b'.' {
            s += 1;
        }
        if !bounded(t, s, e) {
            continue;
        }
        let token = &t[s..e];
        if token.iter().filter(|&&b| b == b':').count() < 2 || !token.iter().any(u8::is_ascii_digit)
        {
            continue;
        }
        // Each group is 1-4 hex digits; `a::b` with hex-only words is code, not an address.
        let groups = token
            .split(|&b| b == b':')
            .filter(|g| !g.is_empty())
            .count();
        if groups < 2 {
            continue;
        }
        let Ok(s_token) = std::str::from_utf8(token) else {
            continue;
        };
        let Ok(ip) = s_token.parse::<Ipv6Addr>() else {
            continue;
        };
        if opts.only_public_ip && !ipv6_public(ip) {
            continue;
        }
        out.push(RawSpan {
            kind: PiiType::IpAddress,
            start: s,
            end: e,
        });
    }
}

fn in_cluster(b: u8) -> bool {
    b.is_ascii_digit() || matches!(b, b' ' | b'.' | b'-' | b'(' | b')' | b'+')
}

/// A digit group of a cluster: `t[start..end]` are digits; `sep` is the single byte between it
/// and the next group (0 when they are not joined by exactly one of ` - .`).
#[derive(Clone, Copy)]
struct Group {
    start: usize,
    end: usize,
    sep: u8,
}

/// Runs of digits and `space . - ( ) +` holding at least four digits: the candidates of the
/// number-shaped types, each checked inside its cluster.
fn digit_clusters(text: &str, opts: &DetectOptions, out: &mut Vec<RawSpan>) {
    let t = text.as_bytes();
    let any_number = [
        PiiType::Phone,
        PiiType::CreditCard,
        PiiType::ChinaId,
        PiiType::UsSsn,
        PiiType::Iban,
        PiiType::IpAddress,
    ]
    .iter()
    .any(|&k| opts.enabled[k as usize]);
    if !any_number {
        return;
    }
    let mut groups: Vec<Group> = Vec::new();
    let mut i = 0;
    let n = t.len();
    while i < n {
        // Jump to the next digit (or '+'/'(' right before a digit).
        let Some(d) = t[i..].iter().position(u8::is_ascii_digit) else {
            break;
        };
        let mut s = i + d;
        while s > i && matches!(t[s - 1], b'+' | b'(') {
            s -= 1;
        }
        let mut e = i + d;
        let mut digits = 0;
        while e < n && in_cluster(t[e]) {
            digits += t[e].is_ascii_digit() as usize;
            e += 1;
        }
        if digits >= 2 {
            groups.clear();
            let mut j = s;
            while j < e {
                if t[j].is_ascii_digit() {
                    let gs = j;
                    while j < e && t[j].is_ascii_digit() {
                        j += 1;
                    }
                    let sep = if j + 1 < e
                        && matches!(t[j], b' ' | b'-' | b'.')
                        && t[j + 1].is_ascii_digit()
                    {
                        t[j]
                    } else {
                        0
                    };
                    groups.push(Group {
                        start: gs,
                        end: j,
                        sep,
                    });
                } else {
                    j += 1;
                }
            }
            cluster(text, s, e, &groups, digits, opts, out);
        }
        i = e.max(i + d + 1);
    }
}

const VERSION_WORDS: [&str; 24] = [
    "section",
    "sections",
    "chapter",
    "clause",
    "v",
    "ver",
    "version",
    "versions",
    "release",
    "released",
    "releases",
    "rel",
    "revision",
    "rev",
    "build",
    "tag",
    "bump",
    "bumped",
    "upgrade",
    "upgraded",
    "downgrade",
    "update",
    "updated",
    "changelog",
];

/// Whether a dotted quad at `t[s..e]` reads as a version number: see the module docs of the
/// Python stage (the previous word is a version word, the line holds another dotted number
/// of 3 or 5+ parts or one written `v1.2`, the line is a Markdown heading or an RST
/// heading's, or the quad opens the line followed by ` (`).
fn looks_like_version(t: &[u8], s: usize, e: usize) -> bool {
    // The line, or its 256 bytes either side: a long line of addresses stays linear.
    let (lo, hi) = (s.saturating_sub(256), (e + 256).min(t.len()));
    let (ls, starts_line) = match memchr::memrchr(b'\n', &t[lo..s]) {
        Some(p) => (lo + p + 1, true),
        None => (lo, lo == 0),
    };
    let (le, ends_line) = match memchr::memchr(b'\n', &t[e..hi]) {
        Some(p) => (e + p, true),
        None => (hi, hi == t.len()),
    };
    // Previous word.
    let head = &t[ls..s];
    let trimmed = head
        .iter()
        .rposition(|&b| !(b == b' ' || b == b'\t' || b == b':' || b == b'=' || b == b'['))
        .map_or(&head[..0], |p| &head[..=p]);
    let word_start = trimmed
        .iter()
        .rposition(|&b| !b.is_ascii_alphabetic())
        .map_or(0, |p| p + 1);
    let word = &trimmed[word_start..];
    if !word.is_empty()
        && VERSION_WORDS
            .iter()
            .any(|w| word.eq_ignore_ascii_case(w.as_bytes()))
    {
        return true;
    }
    let line = &t[ls..le];
    let first = line
        .iter()
        .position(|&b| !(b == b' ' || b == b'\t'))
        .unwrap_or(0);
    if starts_line && line.get(first) == Some(&b'#') {
        return true;
    }
    // An RST heading: the next line is an underline.
    if ends_line && le < t.len() {
        let ns = le + 1;
        let ne = memchr::memchr(b'\n', &t[ns..(ns + 200).min(t.len())])
            .map_or((ns + 200).min(t.len()), |p| ns + p);
        let next = &t[ns..ne];
        if next.len() >= 3
            && next
                .iter()
                .all(|&b| matches!(b, b'-' | b'=' | b'~' | b'^' | b'*'))
        {
            return true;
        }
    }
    // `1.2.3.4 (2021-03-04)` opening a line.
    let lead = &line[first..s - ls];
    if starts_line
        && lead.iter().all(|&b| matches!(b, b'*' | b'-' | b'[' | b' '))
        && t[e..le].starts_with(b" (")
    {
        return true;
    }
    // Another dotted number on the line within 80 bytes, of 3 or 5+ parts (not a NANP phone
    // number `415.555.0132`), or written `v1.2.3.4`.
    let (ls, le) = (ls.max(s.saturating_sub(80)), le.min(e + 80));
    let mut k = ls;
    while k < le {
        let word_start =
            |i: usize| i == ls || !t[i - 1].is_ascii_alphanumeric() && t[i - 1] != b'.';
        let v_prefixed = k > ls && (t[k - 1] == b'v' || t[k - 1] == b'V') && word_start(k - 1);
        if t[k].is_ascii_digit() && (word_start(k) || v_prefixed) {
            let mut parts = 1;
            let mut j = k;
            while j < le
                && (t[j].is_ascii_digit()
                    || (t[j] == b'.' && j + 1 < le && t[j + 1].is_ascii_digit()))
            {
                parts += (t[j] == b'.') as usize;
                j += 1;
            }
            let phone_like = parts == 3 && j - k == 12 && t[k + 3] == b'.' && t[k + 7] == b'.';
            if (k < s || k >= e)
                && ((parts == 3 && !phone_like) || parts >= 5 || (v_prefixed && parts >= 2))
            {
                return true;
            }
            k = j.max(k + 1);
        } else {
            k += 1;
        }
    }
    false
}

fn digits_of(t: &[u8], groups: &[Group]) -> Vec<u8> {
    groups
        .iter()
        .flat_map(|g| t[g.start..g.end].iter().copied())
        .collect()
}

/// Runs of groups joined by one same separator, maximal: each run is a number-shaped token.
fn runs(groups: &[Group]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut a = 0;
    while a < groups.len() {
        let mut b = a + 1;
        while b < groups.len() && groups[b - 1].sep != 0 && groups[b - 1].sep == groups[a].sep {
            b += 1;
        }
        out.push((a, b));
        // Inside a run joined by spaces each number stands alone too (`24 516989195708207610`).
        if b - a > 1 && groups[a].sep == b' ' {
            out.extend((a..b).map(|g| (g, g + 1)));
        }
        // The last group may open a run with another separator (`0 552-40-0600`).
        a = if b < groups.len() && groups[b - 1].sep != 0 && b - a > 1 {
            b - 1
        } else {
            b
        };
    }
    out
}

fn glen(g: &Group) -> usize {
    g.end - g.start
}

#[allow(clippy::too_many_arguments)]
fn cluster(
    text: &str,
    cs: usize,
    ce: usize,
    groups: &[Group],
    digits: usize,
    opts: &DetectOptions,
    out: &mut Vec<RawSpan>,
) {
    let t = text.as_bytes();
    let on = |k: PiiType| opts.enabled[k as usize];
    let push = |out: &mut Vec<RawSpan>, kind, start, end| out.push(RawSpan { kind, start, end });
    // IBAN: two upper-case letters right before a group of two check digits.
    if on(PiiType::Iban) {
        for g in groups {
            if g.start >= 2
                && t[g.start - 1].is_ascii_uppercase()
                && t[g.start - 2].is_ascii_uppercase()
                && !before(t, g.start - 2).is_some_and(is_word)
            {
                if let Some(e) = iban_at(t, g.start - 2) {
                    push(out, PiiType::Iban, g.start - 2, e);
                }
            }
        }
    }
    if digits < 4 {
        return;
    }
    if on(PiiType::Phone) {
        let cluster = &text[cs..ce];
        if cluster.contains('+') {
            for m in PHONE_INTL.find_iter(cluster) {
                let s = cs + m.start();
                // The match may run into a following number (`+1 (228) 712-0197 24px`): try
                // it shorter, a digit group at a time.
                let mut e = cs + m.end();
                while e > s + 1 {
                    let n = t[s..e].iter().filter(|b| b.is_ascii_digit()).count();
                    // `+192.168.1.2` is an address with a sign, not a phone number.
                    let dotted_quad = t[s + 1..e].iter().filter(|&&b| b == b'.').count() == 3
                        && t[s + 1..e].iter().all(|&b| b == b'.' || b.is_ascii_digit());
                    // The last group has two digits or more (`+33 1 11 52 13 14 0` ends at 14),
                    // and a NANP number (+1) has eleven digits.
                    let last_group = t[s..e]
                        .iter()
                        .rev()
                        .take_while(|b| b.is_ascii_digit())
                        .count();
                    let nanp = t[s + 1] == b'1' && !t[s + 2].is_ascii_digit();
                    if !dotted_quad
                        && last_group != 1
                        && (!nanp || n == 11)
                        && (8..=15).contains(&n)
                        && bounded(t, s, e)
                        && !before(t, s).is_some_and(|b| b.is_ascii_digit())
                    {
                        push(out, PiiType::Phone, s, e);
                        break;
                    }
                    if n < 8 {
                        break;
                    }
                    // Drop the last digit group and the separators before it.
                    while e > s + 1 && (t[e - 1].is_ascii_digit() || t[e - 1] == b')') {
                        e -= 1;
                    }
                    while e > s + 1 && !t[e - 1].is_ascii_digit() && t[e - 1] != b')' {
                        e -= 1;
                    }
                }
            }
        }
        if cluster.contains('(') {
            for m in PHONE_NANP_PAREN.find_iter(cluster) {
                let (s, e) = (cs + m.start(), cs + m.end());
                if bounded(t, s, e) {
                    push(out, PiiType::Phone, s, e);
                }
            }
        }
    }
    for (a, b) in runs(groups) {
        let run = &groups[a..b];
        let (s, e) = (run[0].start, run[b - a - 1].end);
        // A China ID's check character may be `X`: the only letter a run may be glued to.
        let x_check =
            b - a == 1 && glen(&run[0]) == 17 && t.get(e).is_some_and(|&c| c == b'X' || c == b'x');
        if !bounded(t, s, if x_check { e + 1 } else { e }) {
            continue;
        }
        let sep = if run.len() > 1 { run[0].sep } else { 0 };
        let lens: Vec<usize> = run.iter().map(glen).collect();
        let first = t[s];
        // Glued to a longer dotted or dashed number on either side: part of something else.
        let glued = before(t, s).is_some_and(|b| matches!(b, b'.' | b'-' | b'/' | b'_'))
            && s >= 2
            && t[s - 2].is_ascii_alphanumeric()
            || t.get(e).is_some_and(|&b| matches!(b, b'.' | b'-' | b'/'))
                && t.get(e + 1).is_some_and(u8::is_ascii_digit);
        if glued {
            continue;
        }
        match (sep, lens.as_slice()) {
            (b'.', [_, _, _, _])
                if on(PiiType::IpAddress)
                    && lens.iter().all(|&l| l <= 3)
                    && run.iter().all(|g| glen(g) == 1 || t[g.start] != b'0')
                    && before(t, s).is_none_or(|b| b != b'.') =>
            {
                let Ok(ip) = std::str::from_utf8(&t[s..e])
                    .unwrap_or("")
                    .parse::<Ipv4Addr>()
                else {
                    continue;
                };
                if opts.only_public_ip && !ipv4_public(ip) {
                    continue;
                }
                if !looks_like_version(t, s, e) {
                    push(out, PiiType::IpAddress, s, e);
                }
            }
            (b'-', [3, 2, 4]) if on(PiiType::UsSsn) => {
                let g = |i: usize| &t[run[i].start..run[i].end];
                if ssn_valid(g(0), g(1), g(2)) {
                    push(out, PiiType::UsSsn, s, e);
                }
            }
            (b'-' | b'.', [3, 3, 4]) | (b'-' | b'.', [1, 3, 3, 4]) if on(PiiType::Phone) => {
                let off = if lens.len() == 4 {
                    if first != b'1' {
                        continue;
                    }
                    1
                } else {
                    0
                };
                let area = t[run[off].start];
                let exchange = t[run[off + 1].start];
                if (b'2'..=b'9').contains(&area) && (b'2'..=b'9').contains(&exchange) {
                    push(out, PiiType::Phone, s, e);
                }
            }
            (b' ' | b'-', [3, 4, 4])
                if on(PiiType::Phone) && first == b'1' && (b'3'..=b'9').contains(&t[s + 1]) =>
            {
                push(out, PiiType::Phone, s, e);
            }
            // China landline: 0 + area code, then a local number not starting with 0 or 1.
            (b'-', [3 | 4, 7 | 8])
                if on(PiiType::Phone)
                    && first == b'0'
                    && t[s + 1] != b'0'
                    && (b'2'..=b'9').contains(&t[run[1].start]) =>
            {
                push(out, PiiType::Phone, s, e);
            }
            (0, [11])
                if on(PiiType::Phone) && first == b'1' && (b'3'..=b'9').contains(&t[s + 1]) =>
            {
                push(out, PiiType::Phone, s, e);
            }
            (0, [17])
                if on(PiiType::ChinaId)
                    && t.get(e).is_some_and(|&b| b == b'X' || b == b'x')
                    && !t.get(e + 1).copied().is_some_and(is_word)
                    && china_id_valid(&t[s..e + 1]) =>
            {
                push(out, PiiType::ChinaId, s, e + 1);
            }
            (0, [18]) if on(PiiType::ChinaId) && china_id_valid(&t[s..e]) => {
                push(out, PiiType::ChinaId, s, e);
            }
            _ => {}
        }
        // Payment cards: the whole run, no separator or one of ` -`, in the groupings printed
        // on cards (4-4-4-4[-3], 4-6-5, 4-6-4) or unseparated.
        if on(PiiType::CreditCard) && matches!(sep, 0 | b' ' | b'-') {
            let total: usize = lens.iter().sum();
            let shape = lens.len() == 1
                || matches!(lens.as_slice(), [4, 6, 5] | [4, 6, 4])
                || (lens.len() >= 4
                    && lens[..lens.len() - 1].iter().all(|&l| l == 4)
                    && lens[lens.len() - 1] <= 4);
            if (13..=19).contains(&total) && shape {
                let d = digits_of(t, run);
                if card_iin(&d) && luhn(&d) {
                    push(out, PiiType::CreditCard, s, e);
                }
            }
        }
    }
}

/// The end of a valid IBAN starting at `s` (country code), read as its country's length of
/// letters and digits in print groups of four separated by single spaces, or unseparated.
fn iban_at(t: &[u8], s: usize) -> Option<usize> {
    let len = iban_length(&t[s..s + 2])?;
    let mut buf = [0u8; 34];
    let mut n = 0;
    let mut j = s;
    let mut spaced = None;
    while n < len && j < t.len() {
        let b = t[j];
        if b == b' ' {
            // Print format: a space after every four characters, and only there.
            if n % 4 != 0
                || spaced == Some(false)
                || !t.get(j + 1).is_some_and(|c| c.is_ascii_alphanumeric())
            {
                return None;
            }
            spaced = Some(true);
            j += 1;
            continue;
        }
        if !(b.is_ascii_digit() || b.is_ascii_uppercase()) {
            return None;
        }
        if n > 0 && n % 4 == 0 && spaced.is_none() {
            spaced = Some(false);
        }
        if spaced == Some(true) && n % 4 == 0 && t[j - 1] != b' ' {
            return None;
        }
        buf[n] = b;
        n += 1;
        j += 1;
    }
    if n != len || t.get(j).copied().is_some_and(is_word) {
        return None;
    }
    iban_valid(&buf[..n]).then_some(j)
}
