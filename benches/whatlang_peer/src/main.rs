//! Bench-only peer of tokpipe's `language` stage (benches/python/bench_language_id.py):
//! whatlang over a JSONL file of {"text"} rows, the first MAX_CHARS characters of each.
//! Usage: whatlang_peer IN.jsonl MAX_CHARS OUT.txt. Writes one ISO 639-3 code a line ("und"
//! when whatlang gives none) and prints the CPU seconds of the detection loop alone to stderr.
use std::io::{BufRead, BufReader, Write};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (input, max_chars, output) = (&args[1], args[2].parse::<usize>().unwrap(), &args[3]);
    let texts: Vec<String> = BufReader::new(std::fs::File::open(input).unwrap())
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(&l.unwrap()).unwrap();
            v["text"].as_str().unwrap().chars().take(max_chars).collect()
        })
        .collect();
    let cpu = || {
        let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: a valid out-pointer to a timespec.
        unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) };
        t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
    };
    let start = cpu();
    let langs: Vec<String> = texts
        .iter()
        .map(|t| match whatlang::detect(t) {
            Some(info) => info.lang().code().to_string(),
            None => "und".to_string(),
        })
        .collect();
    let secs = cpu() - start;
    let mut out = std::fs::File::create(output).unwrap();
    for l in &langs {
        writeln!(out, "{l}").unwrap();
    }
    eprintln!("{secs}");
}
