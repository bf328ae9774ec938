//! Hand-written scanners for the preset patterns.
//!
//! PLACEHOLDER: these currently delegate to fancy-regex with the preset's pattern; the
//! hand-written versions replace them.

use super::{CL100K_PATTERN, GPT2_PATTERN, O200K_PATTERN};
use std::sync::OnceLock;

fn run<'a>(cell: &OnceLock<fancy_regex::Regex>, pattern: &str, text: &'a str, emit: &mut impl FnMut(&'a str)) {
    let re = cell.get_or_init(|| fancy_regex::Regex::new(pattern).expect("preset pattern compiles"));
    for m in re.find_iter(text) {
        emit(m.expect("preset patterns are possessive and do not hit the backtrack limit").as_str());
    }
}

pub fn gpt2<'a>(text: &'a str, emit: &mut impl FnMut(&'a str)) {
    static RE: OnceLock<fancy_regex::Regex> = OnceLock::new();
    run(&RE, GPT2_PATTERN, text, emit)
}

pub fn cl100k<'a>(text: &'a str, emit: &mut impl FnMut(&'a str)) {
    static RE: OnceLock<fancy_regex::Regex> = OnceLock::new();
    run(&RE, CL100K_PATTERN, text, emit)
}

pub fn o200k<'a>(text: &'a str, emit: &mut impl FnMut(&'a str)) {
    static RE: OnceLock<fancy_regex::Regex> = OnceLock::new();
    run(&RE, O200K_PATTERN, text, emit)
}
