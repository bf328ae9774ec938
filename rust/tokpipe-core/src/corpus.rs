//! Streaming readers for training input: plain text and JSON lines, either of them optionally
//! gzip- or zstd-compressed.
//!
//! A file's type comes from its name: `.jsonl` and `.json` are JSON lines, anything else is
//! text; a trailing `.gz` or `.zst` adds decompression. In a text file every line, *with* its
//! `\n`, is one document, which is how HF `tokenizers` reads training files (so both train on
//! the same sequences). In a JSON-lines file every record's text field is one document.
//!
//! Reading is split in two so that both halves run in parallel:
//! - [`read_batches`] (a few reader threads, each taking the next unread file) opens,
//!   decompresses and cuts the files into [`Batch`]es of about [`BATCH_BYTES`] of whole lines,
//!   packing many small files into one batch. Memory is a few batches, never a whole file; a
//!   line longer than a batch becomes its own batch. Several readers matter for corpora of many
//!   small files, where opening files is most of the reading.
//! - [`for_each_document`] (any thread) turns a batch into documents: it checks UTF-8, parses
//!   JSON and sets aside what cannot be used, counting every case in a [`ReportBuilder`].
//!
//! Nothing bad in a file stops the run unless [`CorpusOptions::strict`] asks for it: invalid
//! UTF-8 is replaced with U+FFFD, unusable JSON records are set aside, and a corrupt compressed
//! stream ends its file. Each case is counted in the [`CorpusReport`], with the first few
//! examples (file, line, reason).
//!
//! (Over 500 lines: 343 of them are its unit tests and the scratch-file helpers the trainers' tests
//! share; the rest is the two halves of one reader, batching and document parsing, and the report
//! both fill in (about 180 lines).)

use crate::error::{Error, Result};
use crate::jsonl::{parse_record, FieldValue, RecordSpec};
use std::borrow::Cow;
use std::io::Read;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Target size of one batch of whole lines handed to a counting thread: big enough that the
/// per-batch overhead vanishes, small enough that memory and load balance stay good.
pub(crate) const BATCH_BYTES: usize = 1 << 20;

/// How many set-aside examples a report keeps.
pub const MAX_SET_ASIDE_EXAMPLES: usize = 20;

/// How training files are read.
#[derive(Clone, Debug)]
pub struct CorpusOptions {
    /// Fail on the first bad input (invalid UTF-8, unusable JSON record, corrupt compressed
    /// stream) with an [`Error::Corpus`] naming the file and line, instead of counting it.
    pub strict: bool,
    /// The field of a JSON-lines record that holds the document's text.
    pub text_field: String,
}

impl Default for CorpusOptions {
    fn default() -> Self {
        CorpusOptions {
            strict: false,
            text_field: "text".to_string(),
        }
    }
}

/// Why a piece of input was not used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SetAsideReason {
    /// A JSON-lines line is not valid JSON, or not a JSON object.
    MalformedJson,
    /// A JSON record has no text field.
    MissingTextField,
    /// A JSON record's text field is not a string (null, number, array, ...).
    NonStringTextField,
    /// A gzip or zstd stream is corrupt or truncated; the rest of its file was not read.
    CorruptStream,
}

impl SetAsideReason {
    /// Every reason, in the order reports list them.
    pub const ALL: [SetAsideReason; 4] = [
        SetAsideReason::MalformedJson,
        SetAsideReason::MissingTextField,
        SetAsideReason::NonStringTextField,
        SetAsideReason::CorruptStream,
    ];

    /// A stable snake_case name, for reports and the Python side.
    pub fn as_str(self) -> &'static str {
        match self {
            SetAsideReason::MalformedJson => "malformed_json",
            SetAsideReason::MissingTextField => "missing_text_field",
            SetAsideReason::NonStringTextField => "non_string_text_field",
            SetAsideReason::CorruptStream => "corrupt_stream",
        }
    }
}

impl std::fmt::Display for SetAsideReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One piece of input that was set aside.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetAside {
    pub path: PathBuf,
    /// 1-based line number (of the decompressed text for compressed files).
    pub line: u64,
    pub reason: SetAsideReason,
    /// What exactly was wrong (the JSON parser's message, the field's type, ...).
    pub detail: String,
}

/// What reading a corpus found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CorpusReport {
    /// Files opened, empty ones included.
    pub files: u64,
    /// Files with no bytes at all.
    pub empty_files: u64,
    /// Documents used for training (text lines, or JSON records with a string text field).
    pub documents: u64,
    /// UTF-8 bytes of those documents (after any U+FFFD replacement).
    pub bytes: u64,
    /// Documents that held invalid UTF-8, used with U+FFFD in place of the bad bytes.
    pub invalid_utf8_documents: u64,
    /// JSON lines set aside as not valid JSON or not an object.
    pub malformed_json: u64,
    /// JSON records set aside for lacking the text field.
    pub missing_text_field: u64,
    /// JSON records set aside because the text field is not a string.
    pub non_string_text_field: u64,
    /// Compressed files cut short by a corrupt or truncated stream.
    pub corrupt_streams: u64,
    /// The first [`MAX_SET_ASIDE_EXAMPLES`] set-aside cases, in file and line order.
    pub examples: Vec<SetAside>,
}

impl CorpusReport {
    /// Everything set aside, all reasons together.
    pub fn set_aside(&self) -> u64 {
        self.malformed_json
            + self.missing_text_field
            + self.non_string_text_field
            + self.corrupt_streams
    }

    /// The count kept for one reason.
    pub fn count(&self, reason: SetAsideReason) -> u64 {
        match reason {
            SetAsideReason::MalformedJson => self.malformed_json,
            SetAsideReason::MissingTextField => self.missing_text_field,
            SetAsideReason::NonStringTextField => self.non_string_text_field,
            SetAsideReason::CorruptStream => self.corrupt_streams,
        }
    }

    fn count_mut(&mut self, reason: SetAsideReason) -> &mut u64 {
        match reason {
            SetAsideReason::MalformedJson => &mut self.malformed_json,
            SetAsideReason::MissingTextField => &mut self.missing_text_field,
            SetAsideReason::NonStringTextField => &mut self.non_string_text_field,
            SetAsideReason::CorruptStream => &mut self.corrupt_streams,
        }
    }
}

/// A [`CorpusReport`] under construction by one thread; builders from several threads are
/// merged, and examples are put in file order at the end so the report does not depend on
/// which thread read what.
#[derive(Debug, Default)]
pub(crate) struct ReportBuilder {
    report: CorpusReport,
    /// (index of the file in the input list, example)
    examples: Vec<(usize, SetAside)>,
}

impl ReportBuilder {
    fn set_aside(
        &mut self,
        file: usize,
        path: &Path,
        line: u64,
        reason: SetAsideReason,
        detail: String,
    ) {
        *self.report.count_mut(reason) += 1;
        // Each builder keeps its own first few; the merged list is cut again in `finish`.
        if self.examples.len() < MAX_SET_ASIDE_EXAMPLES {
            self.examples.push((
                file,
                SetAside {
                    path: path.to_path_buf(),
                    line,
                    reason,
                    detail,
                },
            ));
        }
    }

    pub(crate) fn absorb(&mut self, other: ReportBuilder) {
        let (r, o) = (&mut self.report, other.report);
        r.files += o.files;
        r.empty_files += o.empty_files;
        r.documents += o.documents;
        r.bytes += o.bytes;
        r.invalid_utf8_documents += o.invalid_utf8_documents;
        r.malformed_json += o.malformed_json;
        r.missing_text_field += o.missing_text_field;
        r.non_string_text_field += o.non_string_text_field;
        r.corrupt_streams += o.corrupt_streams;
        self.examples.extend(other.examples);
    }

    pub(crate) fn finish(mut self) -> CorpusReport {
        self.examples
            .sort_by(|(fa, a), (fb, b)| (fa, a.line).cmp(&(fb, b.line)));
        self.examples.truncate(MAX_SET_ASIDE_EXAMPLES);
        self.report.examples = self.examples.into_iter().map(|(_, e)| e).collect();
        self.report
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Layout {
    /// Every line is a document.
    TextLines,
    /// Every line is a JSON object holding the document in its text field.
    JsonLines,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Compression {
    None,
    Gzip,
    Zstd,
}

/// Decides a file's layout and compression from its name (case-insensitive).
fn file_type(path: &Path) -> (Layout, Compression) {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let (stem, compression) = if let Some(stem) = name.strip_suffix(".gz") {
        (stem, Compression::Gzip)
    } else if let Some(stem) = name.strip_suffix(".zst") {
        (stem, Compression::Zstd)
    } else {
        (name.as_str(), Compression::None)
    };
    let layout = if stem.ends_with(".jsonl") || stem.ends_with(".json") {
        Layout::JsonLines
    } else {
        Layout::TextLines
    };
    (layout, compression)
}

/// Whole lines of one file inside a [`Batch`].
#[derive(Debug)]
pub(crate) struct Segment {
    /// Index of the file in the list given to [`read_batches`].
    pub file: usize,
    pub layout: Layout,
    /// 1-based number of the segment's first line within its file.
    pub first_line: u64,
    pub range: Range<usize>,
}

/// Whole lines from one or more files, read and decompressed but not yet checked.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    pub data: Vec<u8>,
    pub segments: Vec<Segment>,
}

impl Batch {
    /// An empty batch with room for a full one plus the partial line carried over.
    fn empty() -> Self {
        Batch {
            data: Vec::with_capacity(BATCH_BYTES + BATCH_BYTES / 4),
            segments: Vec::new(),
        }
    }
}

/// Counts the bytes taken from the file (for the progress bar) and remembers whether the file
/// itself failed to read, which tells a real I/O error from a corrupt compressed stream.
struct FileSource<'a> {
    file: std::fs::File,
    read_bytes: &'a indicatif::ProgressBar,
    failed: &'a AtomicBool,
}

impl Read for FileSource<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self.file.read(buf) {
            Ok(n) => {
                self.read_bytes.inc(n as u64);
                Ok(n)
            }
            Err(e) => {
                self.failed.store(true, Ordering::Relaxed);
                Err(e)
            }
        }
    }
}

/// Checks that every path is a readable file and returns their total size (for progress).
/// Done before reading anything, so a typo in the last path fails at once.
pub(crate) fn check_paths(paths: &[PathBuf]) -> Result<u64> {
    use rayon::prelude::*;
    // In parallel: a corpus of many small files spends real time in these system calls.
    let metadata: Vec<std::io::Result<std::fs::Metadata>> =
        paths.par_iter().map(std::fs::metadata).collect();
    let mut total = 0;
    for (path, meta) in paths.iter().zip(metadata) {
        let meta = meta.map_err(|e| Error::io(path, e))?;
        if meta.is_dir() {
            return Err(Error::io(
                path,
                std::io::Error::other("is a directory, not a file"),
            ));
        }
        total += meta.len();
    }
    Ok(total)
}

/// Reads files of `paths`, each time taking the next unread one from `next_file` (shared by
/// all reader threads), and hands [`Batch`]es of whole lines to `send`; stops early when
/// `send` returns false or at a file after `stop_after` (the index of the first file that
/// failed, `usize::MAX` while none has). Counts files, empty files and corrupt streams in
/// `report` (the rest is counted where the batches are decoded). On an error, `at` holds the
/// file and line it came from.
#[allow(clippy::too_many_arguments)]
pub(crate) fn read_batches(
    paths: &[PathBuf],
    next_file: &AtomicUsize,
    opts: &CorpusOptions,
    read_bytes: &indicatif::ProgressBar,
    stop_after: &AtomicUsize,
    report: &mut ReportBuilder,
    at: &mut (usize, u64),
    mut send: impl FnMut(Batch) -> bool,
) -> Result<()> {
    let mut batch = Batch::empty();
    loop {
        let index = next_file.fetch_add(1, Ordering::Relaxed);
        let Some(path) = paths.get(index) else { break };
        if index > stop_after.load(Ordering::Relaxed) {
            return Ok(());
        }
        *at = (index, 0);
        let (layout, compression) = file_type(path);
        let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let file_failed = AtomicBool::new(false);
        let source = FileSource {
            file,
            read_bytes,
            failed: &file_failed,
        };
        let mut reader: Box<dyn Read> = match compression {
            Compression::None => Box::new(source),
            Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(
                std::io::BufReader::new(source),
            )),
            Compression::Zstd => match zstd::Decoder::new(source) {
                Ok(d) => Box::new(d),
                Err(e) => return Err(Error::io(path, e)),
            },
        };
        report.report.files += 1;
        let mut segment_start = batch.data.len();
        // Where the search for a newline to cut at resumes: a line longer than a batch is
        // read in many steps, and searching it again each time would be quadratic.
        let mut unsearched = segment_start;
        let mut line = 1u64;
        let mut file_bytes = 0u64;
        loop {
            if index > stop_after.load(Ordering::Relaxed) {
                return Ok(());
            }
            at.1 = line;
            let before = batch.data.len();
            let read = (&mut reader)
                .take(BATCH_BYTES as u64)
                .read_to_end(&mut batch.data);
            let got = batch.data.len() - before;
            file_bytes += got as u64;
            match read {
                // `read_to_end` returns short of its limit only at the end of the stream, which
                // spares small files a last read that would only return 0.
                Ok(_) if got < BATCH_BYTES => {
                    if batch.data.len() > segment_start {
                        batch.segments.push(Segment {
                            file: index,
                            layout,
                            first_line: line,
                            range: segment_start..batch.data.len(),
                        });
                    }
                    break;
                }
                Ok(_) => {}
                Err(e)
                    if file_failed.load(Ordering::Relaxed) || compression == Compression::None =>
                {
                    return Err(Error::io(path, e));
                }
                Err(e) => {
                    // Keep the whole lines decoded so far; the partial line after them is
                    // probably cut mid-way and is dropped with the rest of the stream.
                    let whole = memchr::memrchr(b'\n', &batch.data[segment_start..])
                        .map_or(segment_start, |p| segment_start + p + 1);
                    batch.data.truncate(whole);
                    if whole > segment_start {
                        batch.segments.push(Segment {
                            file: index,
                            layout,
                            first_line: line,
                            range: segment_start..whole,
                        });
                        line += memchr::memchr_iter(b'\n', &batch.data[segment_start..whole])
                            .count() as u64;
                    }
                    let detail = format!(
                        "corrupt or truncated {} stream: {e}",
                        if compression == Compression::Gzip {
                            "gzip"
                        } else {
                            "zstd"
                        }
                    );
                    if opts.strict {
                        return Err(Error::Corpus(format!(
                            "{}:{line}: {detail}",
                            path.display()
                        )));
                    }
                    report.set_aside(index, path, line, SetAsideReason::CorruptStream, detail);
                    break;
                }
            }
            if batch.data.len() >= BATCH_BYTES {
                // Cut after the last complete line; what follows moves to the next batch.
                let Some(last_newline) = memchr::memrchr(b'\n', &batch.data[unsearched..]) else {
                    unsearched = batch.data.len();
                    continue; // one line longer than a batch: keep reading until it ends
                };
                let cut = unsearched + last_newline + 1;
                batch.segments.push(Segment {
                    file: index,
                    layout,
                    first_line: line,
                    range: segment_start..cut,
                });
                line += memchr::memchr_iter(b'\n', &batch.data[segment_start..cut]).count() as u64;
                let mut next = Batch::empty();
                next.data.extend_from_slice(&batch.data[cut..]);
                if !send(std::mem::replace(&mut batch, next)) {
                    return Ok(());
                }
                segment_start = 0;
                unsearched = batch.data.len(); // the carried-over part has no newline
            }
        }
        if file_bytes == 0 {
            report.report.empty_files += 1;
        }
        if batch.data.len() >= BATCH_BYTES && !send(std::mem::replace(&mut batch, Batch::empty())) {
            return Ok(());
        }
    }
    if !batch.data.is_empty() {
        send(batch);
    }
    Ok(())
}

/// Streams `paths` and hands every usable document to `on_document` on the rayon threads:
/// reader threads open and decompress files (one file per reader at a time) and cut them into
/// batches, every rayon thread decodes batches and calls `on_document(state, document)` with
/// the state of its slot in `states` (one slot per thread, so the locks are never contended),
/// then `after_batch(state)` once per batch. Returns what was read and what was set aside, or
/// the error that comes first in corpus order (file, then line), whatever the threads' timing:
/// after an error in file `f`, files after `f` are skipped but `f` and the files before it are
/// read to the end, where an earlier error may still be. This is the reading loop of every
/// trainer.
pub(crate) fn par_for_each_document<S: Send>(
    paths: &[PathBuf],
    opts: &CorpusOptions,
    progress: &indicatif::ProgressBar,
    states: &[std::sync::Mutex<S>],
    on_document: impl Fn(&mut S, &str) -> Result<()> + Sync,
    after_batch: impl Fn(&mut S) + Sync,
) -> Result<CorpusReport> {
    use rayon::prelude::*;
    use std::sync::Mutex;
    assert!(!states.is_empty(), "at least one state");
    let reports: Vec<Mutex<ReportBuilder>> = (0..states.len()).map(|_| Mutex::default()).collect();
    let stop_after = AtomicUsize::new(usize::MAX);
    let failure: Mutex<Option<((usize, u64), Error)>> = Mutex::new(None);
    let fail = |at: (usize, u64), e: Error| {
        stop_after.fetch_min(at.0, Ordering::Relaxed);
        let mut failure = failure.lock().expect("no panics while reading");
        if failure.as_ref().is_none_or(|(first, _)| at < *first) {
            *failure = Some((at, e));
        }
    };
    // Several readers, because with many small files opening them is most of the work.
    let readers = states.len().min(paths.len()).max(1);
    let mut report = ReportBuilder::default();
    let next_file = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        // A few batches in flight per thread keep every thread busy without holding much.
        let (sender, receiver) = std::sync::mpsc::sync_channel::<Batch>(2 * states.len());
        let reader_threads: Vec<_> = (0..readers)
            .map(|_| {
                let sender = sender.clone();
                let (next_file, stop_after) = (&next_file, &stop_after);
                scope.spawn(move || {
                    let mut report = ReportBuilder::default();
                    let mut at = (0, 0);
                    let read = read_batches(
                        paths,
                        next_file,
                        opts,
                        progress,
                        stop_after,
                        &mut report,
                        &mut at,
                        |batch| sender.send(batch).is_ok(),
                    );
                    (read.map_err(|e| (at, e)), report)
                })
            })
            .collect();
        drop(sender);
        receiver.into_iter().par_bridge().for_each(|batch| {
            let first_file = batch.segments.first().map_or(0, |s| s.file);
            if first_file > stop_after.load(Ordering::Relaxed) {
                return; // drain quickly after a failure in an earlier file
            }
            let slot = rayon::current_thread_index().unwrap_or(0) % states.len();
            let mut state = states[slot].lock().expect("no panics while reading");
            let mut report = reports[slot].lock().expect("no panics while reading");
            let mut at = (0, 0);
            let done = for_each_document(&batch, paths, opts, &mut report, &mut at, |doc| {
                on_document(&mut state, doc)
            });
            after_batch(&mut state);
            if let Err(e) = done {
                fail(at, e);
            }
        });
        for reader in reader_threads {
            match reader.join() {
                Ok((read, reader_report)) => {
                    report.absorb(reader_report);
                    if let Err((at, e)) = read {
                        fail(at, e);
                    }
                }
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
    });
    if let Some((_, e)) = failure.into_inner().expect("no panics while reading") {
        return Err(e);
    }
    for part in reports {
        report.absorb(part.into_inner().expect("no panics while reading"));
    }
    Ok(report.finish())
}

/// Calls `on_document` with each usable document of `batch`, in order, and counts documents,
/// bytes, invalid UTF-8 and set-aside records in `report`. `at` keeps the file and line being
/// read, so that a caller reading batches in parallel can tell which of several errors comes
/// first.
pub(crate) fn for_each_document(
    batch: &Batch,
    paths: &[PathBuf],
    opts: &CorpusOptions,
    report: &mut ReportBuilder,
    at: &mut (usize, u64),
    mut on_document: impl FnMut(&str) -> Result<()>,
) -> Result<()> {
    for segment in &batch.segments {
        let path = &paths[segment.file];
        let bytes = &batch.data[segment.range.clone()];
        let mut line_no = segment.first_line;
        *at = (segment.file, line_no);
        // Checking the whole segment at once is the fast path; only a segment with a bad byte
        // is re-checked line by line to find and repair the bad lines.
        if let Ok(text) = std::str::from_utf8(bytes) {
            for line in text.split_inclusive('\n') {
                at.1 = line_no;
                use_line(
                    Cow::Borrowed(line),
                    segment,
                    path,
                    line_no,
                    opts,
                    report,
                    &mut on_document,
                )?;
                line_no += 1;
            }
            continue;
        }
        for raw in bytes.split_inclusive(|&b| b == b'\n') {
            at.1 = line_no;
            let line = match std::str::from_utf8(raw) {
                Ok(line) => Cow::Borrowed(line),
                Err(_) if opts.strict => {
                    return Err(Error::Corpus(format!(
                        "{}:{line_no}: invalid UTF-8 (strict mode)",
                        path.display()
                    )));
                }
                Err(_) => {
                    report.report.invalid_utf8_documents += 1;
                    String::from_utf8_lossy(raw)
                }
            };
            use_line(line, segment, path, line_no, opts, report, &mut on_document)?;
            line_no += 1;
        }
    }
    Ok(())
}

/// One line of a segment: a document itself, or a JSON record holding one.
fn use_line(
    line: Cow<str>,
    segment: &Segment,
    path: &Path,
    line_no: u64,
    opts: &CorpusOptions,
    report: &mut ReportBuilder,
    on_document: &mut impl FnMut(&str) -> Result<()>,
) -> Result<()> {
    match segment.layout {
        Layout::TextLines => {
            report.report.documents += 1;
            report.report.bytes += line.len() as u64;
            on_document(&line)
        }
        // Blank lines (often one at the end of a file) are not records.
        Layout::JsonLines if line.trim_ascii().is_empty() => Ok(()),
        Layout::JsonLines => match extract_text_field(&line, &opts.text_field) {
            Ok(document) => {
                report.report.documents += 1;
                report.report.bytes += document.len() as u64;
                on_document(&document)
            }
            Err((reason, detail)) if opts.strict => Err(Error::Corpus(format!(
                "{}:{line_no}: {reason}: {detail}",
                path.display()
            ))),
            Err((reason, detail)) => {
                report.set_aside(segment.file, path, line_no, reason, detail);
                Ok(())
            }
        },
    }
}

/// Pulls one string field out of a JSON object without building the rest of the record
/// (other fields are skipped unparsed into values). Borrows the text when it has no escapes.
fn extract_text_field<'a>(
    line: &'a str,
    field: &str,
) -> std::result::Result<Cow<'a, str>, (SetAsideReason, String)> {
    let spec = RecordSpec {
        text_field: field,
        id_field: None,
        keep_rest: false,
    };
    let found =
        parse_record(line, &spec).map_err(|e| (SetAsideReason::MalformedJson, e.to_string()))?;
    match found.text {
        Some(FieldValue::Text(text)) => Ok(text),
        Some(FieldValue::Other(kind)) => Err((
            SetAsideReason::NonStringTextField,
            format!("field {field:?} is {kind}, not a string"),
        )),
        None => Err((
            SetAsideReason::MissingTextField,
            format!("no field {field:?}"),
        )),
    }
}

/// Scratch files for tests of this module and of the trainer.
#[cfg(test)]
pub(crate) mod test_files {
    use std::io::Write;
    use std::path::PathBuf;

    /// A fresh directory under the system temp dir, removed on drop.
    pub(crate) struct TempDir(pub PathBuf);

    impl TempDir {
        pub(crate) fn new(name: &str) -> Self {
            let dir =
                std::env::temp_dir().join(format!("tokpipe-corpus-{}-{name}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }

        pub(crate) fn file(&self, name: &str, bytes: &[u8]) -> PathBuf {
            let path = self.0.join(name);
            std::fs::write(&path, bytes).unwrap();
            path
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    pub(crate) fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(bytes).unwrap();
        enc.finish().unwrap()
    }

    pub(crate) fn zstd(bytes: &[u8]) -> Vec<u8> {
        zstd::encode_all(bytes, 3).unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::test_files::{gzip, zstd, TempDir};
    use super::*;

    /// Reads `paths` on this thread, one reader, and returns the documents in order.
    fn read(paths: &[PathBuf], opts: &CorpusOptions) -> Result<(Vec<String>, CorpusReport)> {
        check_paths(paths)?;
        let mut report = ReportBuilder::default();
        let mut batches = Vec::new();
        let (next, stop_after) = (AtomicUsize::new(0), AtomicUsize::new(usize::MAX));
        read_batches(
            paths,
            &next,
            opts,
            &indicatif::ProgressBar::hidden(),
            &stop_after,
            &mut report,
            &mut (0, 0),
            |b| {
                batches.push(b);
                true
            },
        )?;
        let mut docs = Vec::new();
        for batch in &batches {
            for_each_document(batch, paths, opts, &mut report, &mut (0, 0), |d| {
                docs.push(d.to_string());
                Ok(())
            })?;
        }
        Ok((docs, report.finish()))
    }

    #[test]
    fn strict_reports_the_first_error_in_corpus_order_whatever_the_timing() {
        let dir = TempDir::new("strict-order");
        // The later file is small and fails at once; the earlier one fails near its end.
        let mut big = "good line\n".repeat(200_000).into_bytes();
        big.extend_from_slice(b"bad \xff line\n");
        let first = dir.file("a.txt", &big);
        let second = dir.file("b.jsonl", b"{oops\n");
        let paths = vec![first, second];
        let states: Vec<std::sync::Mutex<()>> = (0..4).map(|_| Default::default()).collect();
        for _ in 0..10 {
            let err = par_for_each_document(
                &paths,
                &strict(),
                &indicatif::ProgressBar::hidden(),
                &states,
                |_, _| Ok(()),
                |_| {},
            )
            .unwrap_err()
            .to_string();
            assert!(err.contains("a.txt:200001: invalid UTF-8"), "{err}");
        }
    }

    fn lenient() -> CorpusOptions {
        CorpusOptions::default()
    }

    fn strict() -> CorpusOptions {
        CorpusOptions {
            strict: true,
            ..CorpusOptions::default()
        }
    }

    #[test]
    fn text_lines_keep_their_newlines_and_empty_files_count() {
        let dir = TempDir::new("txt");
        let a = dir.file("a.txt", b"first\nsecond\r\n\nlast without newline");
        let empty = dir.file("empty.txt", b"");
        let b = dir.file("b.md", "unknown extensions are text\n".as_bytes());
        let (docs, report) = read(&[a, empty, b], &lenient()).unwrap();
        assert_eq!(
            docs,
            [
                "first\n",
                "second\r\n",
                "\n",
                "last without newline",
                "unknown extensions are text\n"
            ]
        );
        assert_eq!(
            (report.files, report.empty_files, report.documents),
            (3, 1, 5)
        );
        assert_eq!(
            report.bytes,
            docs.iter().map(|d| d.len() as u64).sum::<u64>()
        );
        assert_eq!(report.set_aside(), 0);
    }

    #[test]
    fn invalid_utf8_is_replaced_and_counted_or_fails_in_strict_mode() {
        let dir = TempDir::new("utf8");
        let path = dir.file("bad.txt", b"good\nba\xffd\nalso \xc3 bad\nfine");
        let (docs, report) = read(std::slice::from_ref(&path), &lenient()).unwrap();
        assert_eq!(
            docs,
            ["good\n", "ba\u{fffd}d\n", "also \u{fffd} bad\n", "fine"]
        );
        assert_eq!(report.invalid_utf8_documents, 2);
        let err = read(&[path], &strict()).unwrap_err();
        assert!(matches!(err, Error::Corpus(_)), "{err:?}");
        assert!(
            err.to_string().contains("bad.txt:2: invalid UTF-8"),
            "{err}"
        );
    }

    #[test]
    fn json_lines_set_aside_bad_records_with_reasons() {
        let dir = TempDir::new("jsonl");
        let lines = [
            r#"{"id": 1, "text": "plain", "meta": {"nested": [1, 2, {"text": "not this"}]}}"#,
            r#"{"text": "esc\"aped\nline \u00e9"}"#,
            "",
            r#"{"text": "unterminated"#,
            r#"{"id": 5}"#,
            r#"{"text": null}"#,
            r#"{"text": ["a"]}"#,
            r#"[1, 2]"#,
            r#"{"text": "trailing"} garbage"#,
            r#"  {"text": "last"}  "#,
        ];
        let path = dir.file("docs.jsonl", lines.join("\n").as_bytes());
        let (docs, report) = read(std::slice::from_ref(&path), &lenient()).unwrap();
        assert_eq!(docs, ["plain", "esc\"aped\nline é", "last"]);
        assert_eq!(report.documents, 3);
        assert_eq!(
            (
                report.malformed_json,
                report.missing_text_field,
                report.non_string_text_field
            ),
            (3, 1, 2)
        );
        let reasons: Vec<(u64, SetAsideReason)> =
            report.examples.iter().map(|e| (e.line, e.reason)).collect();
        use SetAsideReason::*;
        assert_eq!(
            reasons,
            [
                (4, MalformedJson),
                (5, MissingTextField),
                (6, NonStringTextField),
                (7, NonStringTextField),
                (8, MalformedJson),
                (9, MalformedJson)
            ]
        );
        assert!(
            report.examples[2].detail.contains("null"),
            "{:?}",
            report.examples[2]
        );
        assert_eq!(report.examples[0].path, path);

        let err = read(std::slice::from_ref(&path), &strict()).unwrap_err();
        assert!(
            err.to_string().contains("docs.jsonl:4: malformed_json"),
            "{err}"
        );

        // Another text field, and `.json` is read as JSON lines too.
        let other = dir.file("x.json", br#"{"content": "c", "text": "t"}"#);
        let opts = CorpusOptions {
            text_field: "content".into(),
            ..lenient()
        };
        assert_eq!(read(&[other], &opts).unwrap().0, ["c"]);
    }

    #[test]
    fn compressed_files_are_read_by_extension() {
        let dir = TempDir::new("compressed");
        let jsonl = b"{\"text\": \"one\"}\n{\"text\": \"two\"}\n";
        let paths = [
            dir.file("a.jsonl.gz", &gzip(jsonl)),
            dir.file("b.jsonl.zst", &zstd(jsonl)),
            dir.file("c.txt.gz", &gzip(b"x\ny\n")),
            dir.file("d.ZST", &zstd(b"z\n")),
        ];
        let (docs, report) = read(&paths, &lenient()).unwrap();
        assert_eq!(docs, ["one", "two", "one", "two", "x\n", "y\n", "z\n"]);
        assert_eq!(report.files, 4);
    }

    #[test]
    fn truncated_streams_end_their_file_and_are_counted() {
        let dir = TempDir::new("truncated");
        let text: String = (0..20_000)
            .map(|i| format!("{{\"text\": \"line {i}\"}}\n"))
            .collect();
        let gz = gzip(text.as_bytes());
        let zst = zstd(text.as_bytes());
        let paths = [
            dir.file("cut.jsonl.gz", &gz[..gz.len() / 2]),
            dir.file("cut.jsonl.zst", &zst[..zst.len() / 2]),
            dir.file(
                "garbage.jsonl.gz",
                b"\x1f\x8b\x08\x00 definitely not deflate data",
            ),
            dir.file("after.txt", b"still read\n"),
        ];
        let (docs, report) = read(&paths, &lenient()).unwrap();
        assert_eq!(report.corrupt_streams, 3);
        assert_eq!(docs.last().unwrap(), "still read\n");
        // Whole lines before each cut are kept, in order, and nothing after it.
        let leading_lines = |docs: &[String]| {
            docs.iter()
                .enumerate()
                .take_while(|(i, d)| **d == format!("line {i}"))
                .count()
        };
        let from_gz = leading_lines(&docs);
        let from_zst = leading_lines(&docs[from_gz..]);
        assert!(from_gz > 1000 && from_gz < 20_000, "{from_gz}");
        assert!(from_zst > 1000 && from_zst < 20_000, "{from_zst}");
        assert_eq!(from_gz + from_zst + 1, docs.len());
        let cut = &report.examples[0];
        assert_eq!(
            (cut.reason, cut.line),
            (SetAsideReason::CorruptStream, from_gz as u64 + 1)
        );
        assert_eq!(
            report.malformed_json, 0,
            "a partial last line is not parsed"
        );

        let err = read(&paths[1..2], &strict()).unwrap_err();
        assert!(
            err.to_string().contains("cut.jsonl.zst:") && err.to_string().contains("zstd"),
            "{err}"
        );
    }

    #[test]
    fn missing_paths_and_directories_are_io_errors_naming_them() {
        let dir = TempDir::new("missing");
        let err = read(&[dir.0.join("nope.txt")], &lenient()).unwrap_err();
        assert!(
            matches!(err, Error::Io { .. }) && err.to_string().contains("nope.txt"),
            "{err}"
        );
        let err = read(std::slice::from_ref(&dir.0), &lenient()).unwrap_err();
        assert!(
            matches!(err, Error::Io { .. }) && err.to_string().contains("directory"),
            "{err}"
        );
    }

    #[test]
    fn line_numbers_survive_batch_boundaries_and_long_lines() {
        let dir = TempDir::new("batches");
        // ~3 batches of short lines, one line longer than a batch, a bad line after both.
        let mut text = Vec::new();
        let short_lines = 3 * BATCH_BYTES / 10;
        for i in 0..short_lines {
            text.extend_from_slice(format!("{:09}\n", i % 1_000_000_000).as_bytes());
        }
        text.extend(std::iter::repeat_n(b'x', 2 * BATCH_BYTES + 7));
        text.push(b'\n');
        text.extend_from_slice(b"bad \xff\n");
        let path = dir.file("big.txt", &text);
        let (docs, report) = read(std::slice::from_ref(&path), &lenient()).unwrap();
        assert_eq!(docs.len(), short_lines + 2);
        assert_eq!(docs[short_lines].len(), 2 * BATCH_BYTES + 8);
        assert_eq!(report.invalid_utf8_documents, 1);
        let err = read(&[path], &strict()).unwrap_err();
        assert!(
            err.to_string()
                .contains(&format!("big.txt:{}:", short_lines + 2)),
            "{err}"
        );
    }

    #[test]
    fn many_small_files_share_batches() {
        let dir = TempDir::new("small");
        let paths: Vec<PathBuf> = (0..500)
            .map(|i| {
                dir.file(
                    &format!("{i}.txt"),
                    format!("doc {i}\nsecond line").as_bytes(),
                )
            })
            .collect();
        let (docs, report) = read(&paths, &lenient()).unwrap();
        assert_eq!(report.documents, 1000);
        let want: Vec<String> = (0..500)
            .flat_map(|i| [format!("doc {i}\n"), "second line".to_string()])
            .collect();
        assert_eq!(docs, want);
    }
}
