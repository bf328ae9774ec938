//! A Parquet writer for one table shape only: packed token rows, `tokpipe tokenize --pack`'s
//! output. Every row holds exactly `width` token ids (`input_ids`, a list of uint16 or
//! uint32) and the count of real tokens in it (`length`, int32; below `width` only for an
//! EOS-padded last row).
//!
//! The file is what pyarrow writes for the same table (schema, types, nullability, V1 data
//! pages, PLAIN values, RLE levels, zstd), without the work a general writer does per value:
//! a list column's repetition and definition levels are computed, buffered and encoded one
//! per token, where here every row has the same shape, so a page's levels are a few runs
//! written directly, and the ids are copied once, from the caller's rows into the page that
//! is compressed.
//!
//! Layout (Apache Parquet format, `parquet.thrift`): `PAR1`, then per row group the
//! `input_ids` column chunk (pages of about 1 MiB of ids, whole rows each) and the `length`
//! column chunk, then the footer: the `FileMetaData` in Thrift's compact protocol, its
//! length (u32 LE) and `PAR1`.
//!
//! ```text
//! optional group input_ids (LIST) {            max definition level 3, repetition 1
//!   repeated group list {
//!     optional int32 element (INTEGER(16|32, unsigned));
//!   }
//! }
//! optional int32 length;                        max definition level 1
//! ```
//!
//! (Over 500 lines: 65 of them are its unit tests; the rest is one writer: its page encoding, the
//! footer's metadata and the small Thrift compact-protocol encoder (about 115 lines) that only this
//! footer uses.)

use crate::error::{Error, Result};
use crate::formats::protobuf::write_varint;
use rayon::prelude::*;
use std::cell::RefCell;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Uncompressed bytes of ids per data page (pyarrow's default page size).
const PAGE_BYTES: usize = 1 << 20;
const MAGIC: &[u8; 4] = b"PAR1";

// Parquet's enums (parquet.thrift).
const TYPE_INT32: i32 = 1;
const REPETITION_REQUIRED: i32 = 0;
const REPETITION_OPTIONAL: i32 = 1;
const REPETITION_REPEATED: i32 = 2;
const CONVERTED_LIST: i32 = 3;
const CONVERTED_UINT_16: i32 = 12;
const CONVERTED_UINT_32: i32 = 13;
const ENCODING_PLAIN: i32 = 0;
const ENCODING_RLE: i32 = 3;
const CODEC_UNCOMPRESSED: i32 = 0;
const CODEC_ZSTD: i32 = 6;
const PAGE_DATA: i32 = 0;

/// How pages are compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    /// zstd at this level (1 is pyarrow's default for zstd).
    Zstd(i32),
}

/// Token ids the writer takes: stored as Parquet INT32 with an unsigned logical type of
/// this width.
pub trait TokenId: Copy + Into<u32> + Sync {
    const BITS: u8;

    /// Appends `ids` as little-endian 32-bit values.
    fn put_le(ids: &[Self], out: &mut Vec<u8>);
}

impl TokenId for u16 {
    const BITS: u8 = 16;

    fn put_le(ids: &[Self], out: &mut Vec<u8>) {
        let start = out.len();
        // Sized first, then filled in place: a loop the compiler vectorises (pushing four
        // bytes at a time does not).
        out.resize(start + 4 * ids.len(), 0);
        for (slot, &id) in out[start..].chunks_exact_mut(4).zip(ids) {
            slot.copy_from_slice(&u32::from(id).to_le_bytes());
        }
    }
}

impl TokenId for u32 {
    const BITS: u8 = 32;

    fn put_le(ids: &[Self], out: &mut Vec<u8>) {
        if cfg!(target_endian = "little") {
            // SAFETY: u32 has no padding; the byte view covers exactly the slice.
            let bytes = unsafe {
                std::slice::from_raw_parts(ids.as_ptr() as *const u8, std::mem::size_of_val(ids))
            };
            out.extend_from_slice(bytes);
        } else {
            let start = out.len();
            out.resize(start + 4 * ids.len(), 0);
            for (slot, &id) in out[start..].chunks_exact_mut(4).zip(ids) {
                slot.copy_from_slice(&id.to_le_bytes());
            }
        }
    }
}

/// One column chunk of a row group, as the footer describes it.
#[derive(Clone, Copy)]
struct Chunk {
    first_page: u64,
    values: i64,
    uncompressed: i64,
    compressed: i64,
    min: i32,
    max: i32,
}

impl Chunk {
    fn new(first_page: u64) -> Self {
        Chunk {
            first_page,
            values: 0,
            uncompressed: 0,
            compressed: 0,
            min: i32::MAX,
            max: i32::MIN,
        }
    }
}

struct RowGroup {
    ids: Chunk,
    lengths: Chunk,
    rows: i64,
}

/// A V1 data page ready for the file: its uncompressed size, its body (compressed or not),
/// the values it holds and their min and max.
struct EncodedPage {
    uncompressed: usize,
    body: Vec<u8>,
    values: usize,
    min: i32,
    max: i32,
}

thread_local! {
    // Each thread's zstd context, reused from page to page (and its level).
    static ZSTD: RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> = const { RefCell::new(None) };
}

/// One V1 data page: the levels (each block prefixed with its length, u32 LE) and the values
/// `put` appends (returning their min and max), compressed together.
fn encode_page(
    rep: Option<&[u8]>,
    def: &[u8],
    values: usize,
    compression: Compression,
    put: impl FnOnce(&mut Vec<u8>) -> (i32, i32),
) -> Result<EncodedPage> {
    let mut page = Vec::new();
    for levels in rep.into_iter().chain([def]) {
        page.extend_from_slice(&(levels.len() as u32).to_le_bytes());
        page.extend_from_slice(levels);
    }
    let (min, max) = put(&mut page);
    let uncompressed = page.len();
    let body = match compression {
        Compression::None => page,
        Compression::Zstd(level) => ZSTD.with(|cell| {
            let mut cell = cell.borrow_mut();
            if cell.as_ref().is_none_or(|(l, _)| *l != level) {
                let compressor = zstd::bulk::Compressor::new(level)
                    .map_err(|e| Error::InvalidArgument(format!("zstd level {level}: {e}")))?;
                *cell = Some((level, compressor));
            }
            let (_, compressor) = cell.as_mut().expect("set above");
            compressor
                .compress(&page)
                .map_err(|e| Error::InvalidArgument(format!("zstd: {e}")))
        })?,
    };
    Ok(EncodedPage {
        uncompressed,
        body,
        values,
        min,
        max,
    })
}

/// Writes packed rows to `out` as one Parquet file: [`PackedRowsWriter::write_row_group`]
/// for each run of rows, then [`PackedRowsWriter::finish`] for the footer. Nothing is
/// buffered beyond the row group being written (its pages, compressed in parallel).
pub struct PackedRowsWriter<W: Write> {
    out: W,
    /// What write errors name: the file, or `<output>`.
    path: PathBuf,
    /// Bytes written to `out` so far: the offset of the next page.
    offset: u64,
    width: usize,
    id_bits: u8,
    compression: Compression,
    groups: Vec<RowGroup>,
    rows: i64,
    created_by: String,
    // Reused between pages: the page header.
    header: Vec<u8>,
}

impl PackedRowsWriter<BufWriter<File>> {
    /// Creates (or truncates) the file at `path`; see [`PackedRowsWriter::new`].
    pub fn create(
        path: &Path,
        width: usize,
        id_bits: u8,
        compression: Compression,
        created_by: &str,
    ) -> Result<Self> {
        let file = File::create(path).map_err(|e| Error::io(path, e))?;
        let mut writer = Self::new(
            BufWriter::with_capacity(1 << 20, file),
            width,
            id_bits,
            compression,
            created_by,
        )?;
        writer.path = path.to_path_buf();
        Ok(writer)
    }
}

impl<W: Write> PackedRowsWriter<W> {
    /// A file of rows of `width` ids of `id_bits` bits (16 or 32); `created_by` goes in the
    /// footer (the writing application).
    pub fn new(
        mut out: W,
        width: usize,
        id_bits: u8,
        compression: Compression,
        created_by: &str,
    ) -> Result<Self> {
        if width == 0 || width > i32::MAX as usize {
            return Err(Error::InvalidArgument(format!(
                "a packed row needs 1 to 2^31 - 1 tokens, not {width}"
            )));
        }
        if id_bits != 16 && id_bits != 32 {
            return Err(Error::InvalidArgument(format!(
                "token ids are 16 or 32 bits wide, not {id_bits}"
            )));
        }
        if let Compression::Zstd(level) = compression {
            if !zstd::compression_level_range().contains(&level) {
                return Err(Error::InvalidArgument(format!(
                    "zstd level {level}: not in {:?}",
                    zstd::compression_level_range()
                )));
            }
        }
        let path = PathBuf::from("<output>");
        out.write_all(MAGIC).map_err(|e| Error::io(&path, e))?;
        Ok(PackedRowsWriter {
            out,
            path,
            offset: MAGIC.len() as u64,
            width,
            id_bits,
            compression,
            groups: Vec::new(),
            rows: 0,
            created_by: created_by.to_string(),
            header: Vec::new(),
        })
    }

    /// Rows written so far.
    pub fn rows(&self) -> i64 {
        self.rows
    }

    /// One row group: `ids` holds the rows back to back (`width` ids each), `lengths` the
    /// real tokens of each row (0 to `width`).
    pub fn write_row_group<T: TokenId>(&mut self, ids: &[T], lengths: &[i32]) -> Result<()> {
        if T::BITS != self.id_bits {
            return Err(Error::InvalidArgument(format!(
                "the file holds {}-bit ids, these are {}-bit",
                self.id_bits,
                T::BITS
            )));
        }
        let rows = lengths.len();
        if ids.len() != rows * self.width {
            return Err(Error::InvalidArgument(format!(
                "{} ids are not {rows} rows of {} tokens",
                ids.len(),
                self.width
            )));
        }
        if let Some(bad) = lengths.iter().find(|&&n| n < 0 || n as usize > self.width) {
            return Err(Error::InvalidArgument(format!(
                "a row's length ({bad}) is not between 0 and its {} tokens",
                self.width
            )));
        }
        if rows == 0 {
            return Ok(());
        }
        let width = self.width;
        let compression = self.compression;
        // The pages are encoded and compressed in parallel (each page on its own, so the
        // bytes are the same for any number of threads), then written in order.
        let rows_per_page = (PAGE_BYTES / (4 * width)).max(1);
        let ids_pages: Vec<Result<EncodedPage>> = ids
            .par_chunks(rows_per_page * width)
            .map(|page| {
                let page_rows = page.len() / width;
                // Repetition levels: each row starts a list (0) and continues it (1) for the
                // rest of its ids: two RLE runs a row, bit width 1. Definition levels: every
                // id is present (3, the maximum), one run, bit width 2.
                let mut rep = Vec::with_capacity(page_rows * 8);
                for _ in 0..page_rows {
                    rle_run(&mut rep, 1, 0);
                    if width > 1 {
                        rle_run(&mut rep, width - 1, 1);
                    }
                }
                let mut def = Vec::with_capacity(8);
                rle_run(&mut def, page.len(), 3);
                encode_page(Some(&rep), &def, page.len(), compression, |out| {
                    put_ids(out, page)
                })
            })
            .collect();
        let mut ids_chunk = Chunk::new(self.offset);
        for page in ids_pages {
            self.write_page(page?, &mut ids_chunk)?;
        }
        let mut lengths_chunk = Chunk::new(self.offset);
        for page in lengths.chunks(PAGE_BYTES / 4) {
            let mut def = Vec::with_capacity(8);
            rle_run(&mut def, page.len(), 1);
            let page = encode_page(None, &def, page.len(), compression, |out| {
                put_i32s(out, page)
            })?;
            self.write_page(page, &mut lengths_chunk)?;
        }
        self.groups.push(RowGroup {
            ids: ids_chunk,
            lengths: lengths_chunk,
            rows: rows as i64,
        });
        self.rows += rows as i64;
        Ok(())
    }

    /// One encoded page to the file: its header, then its body.
    fn write_page(&mut self, page: EncodedPage, chunk: &mut Chunk) -> Result<()> {
        self.header.clear();
        let mut t = Thrift::new(&mut self.header);
        t.i32(1, PAGE_DATA);
        t.i32(2, len_i32(page.uncompressed)?);
        t.i32(3, len_i32(page.body.len())?);
        t.begin_struct(5); // DataPageHeader
        t.i32(1, len_i32(page.values)?);
        t.i32(2, ENCODING_PLAIN);
        t.i32(3, ENCODING_RLE);
        t.i32(4, ENCODING_RLE);
        t.end_struct();
        t.stop();
        let path = &self.path;
        self.out
            .write_all(&self.header)
            .and_then(|_| self.out.write_all(&page.body))
            .map_err(|e| Error::io(path, e))?;
        let head = self.header.len() as i64;
        chunk.values += page.values as i64;
        chunk.uncompressed += head + page.uncompressed as i64;
        chunk.compressed += head + page.body.len() as i64;
        chunk.min = chunk.min.min(page.min);
        chunk.max = chunk.max.max(page.max);
        self.offset += (self.header.len() + page.body.len()) as u64;
        Ok(())
    }

    /// Writes the footer and returns the output.
    pub fn finish(mut self) -> Result<W> {
        let mut footer = Vec::new();
        self.file_metadata(&mut footer);
        let written = self
            .out
            .write_all(&footer)
            .and_then(|_| self.out.write_all(&(footer.len() as u32).to_le_bytes()))
            .and_then(|_| self.out.write_all(MAGIC))
            .and_then(|_| self.out.flush());
        written.map_err(|e| Error::io(&self.path, e))?;
        Ok(self.out)
    }

    fn file_metadata(&self, buf: &mut Vec<u8>) {
        let mut t = Thrift::new(buf);
        t.i32(1, 2); // version
        t.list(2, STRUCT, 5); // schema, depth first
        t.element(|t| {
            t.i32(3, REPETITION_REQUIRED);
            t.binary(4, b"schema");
            t.i32(5, 2);
        });
        t.element(|t| {
            t.i32(3, REPETITION_OPTIONAL);
            t.binary(4, b"input_ids");
            t.i32(5, 1);
            t.i32(6, CONVERTED_LIST);
            t.begin_struct(10); // LogicalType
            t.begin_struct(3); // LIST
            t.end_struct();
            t.end_struct();
        });
        t.element(|t| {
            t.i32(3, REPETITION_REPEATED);
            t.binary(4, b"list");
            t.i32(5, 1);
        });
        let (bits, converted) = if self.id_bits == 16 {
            (16, CONVERTED_UINT_16)
        } else {
            (32, CONVERTED_UINT_32)
        };
        t.element(|t| {
            t.i32(1, TYPE_INT32);
            t.i32(3, REPETITION_OPTIONAL);
            t.binary(4, b"element");
            t.i32(6, converted);
            t.begin_struct(10); // LogicalType
            t.begin_struct(10); // INTEGER
            t.i8(1, bits);
            t.bool(2, false);
            t.end_struct();
            t.end_struct();
        });
        t.element(|t| {
            t.i32(1, TYPE_INT32);
            t.i32(3, REPETITION_OPTIONAL);
            t.binary(4, b"length");
        });
        t.i64(3, self.rows);
        t.list(4, STRUCT, self.groups.len());
        let codec = match self.compression {
            Compression::None => CODEC_UNCOMPRESSED,
            Compression::Zstd(_) => CODEC_ZSTD,
        };
        for (ordinal, group) in self.groups.iter().enumerate() {
            t.element(|t| {
                t.list(1, STRUCT, 2);
                for (chunk, path) in [
                    (&group.ids, &[&b"input_ids"[..], b"list", b"element"][..]),
                    (&group.lengths, &[&b"length"[..]][..]),
                ] {
                    t.element(|t| column_chunk(t, chunk, path, codec));
                }
                t.i64(2, group.ids.uncompressed + group.lengths.uncompressed);
                t.i64(3, group.rows);
                t.i64(5, group.ids.first_page as i64);
                t.i64(6, group.ids.compressed + group.lengths.compressed);
                t.i16(7, ordinal as i16);
            });
        }
        t.binary(6, self.created_by.as_bytes());
        // Column orders: min/max statistics follow each column's logical type (unsigned ids).
        t.list(7, STRUCT, 2);
        for _ in 0..2 {
            t.element(|t| {
                t.begin_struct(1); // TYPE_ORDER
                t.end_struct();
            });
        }
        t.stop();
    }
}

fn column_chunk(t: &mut Thrift<'_>, chunk: &Chunk, path: &[&[u8]], codec: i32) {
    t.i64(2, chunk.first_page as i64); // file_offset (deprecated): where the chunk starts
    t.begin_struct(3); // ColumnMetaData
    t.i32(1, TYPE_INT32);
    t.list(2, I32, 2);
    t.list_i32(ENCODING_PLAIN);
    t.list_i32(ENCODING_RLE);
    t.list(3, BINARY, path.len());
    for part in path {
        t.list_binary(part);
    }
    t.i32(4, codec);
    t.i64(5, chunk.values);
    t.i64(6, chunk.uncompressed);
    t.i64(7, chunk.compressed);
    t.i64(9, chunk.first_page as i64);
    t.begin_struct(12); // Statistics: min_value / max_value, in the column order
    t.i64(3, 0); // null_count
    t.binary(5, &chunk.max.to_le_bytes());
    t.binary(6, &chunk.min.to_le_bytes());
    t.end_struct();
    t.end_struct();
}

/// Appends ids as little-endian INT32; returns their min and max.
fn put_ids<T: TokenId>(out: &mut Vec<u8>, ids: &[T]) -> (i32, i32) {
    T::put_le(ids, out);
    let (min, max) = ids.iter().fold((u32::MAX, 0u32), |(lo, hi), &id| {
        (lo.min(id.into()), hi.max(id.into()))
    });
    // Token ids are far below 2^31; the statistics hold their bytes either way.
    (min as i32, max as i32)
}

fn put_i32s(out: &mut Vec<u8>, values: &[i32]) -> (i32, i32) {
    let (mut min, mut max) = (i32::MAX, i32::MIN);
    out.reserve(4 * values.len());
    for &v in values {
        min = min.min(v);
        max = max.max(v);
        out.extend_from_slice(&v.to_le_bytes());
    }
    (min, max)
}

/// An RLE run of the RLE/bit-packing hybrid: `count` copies of `value` (a level, < 256,
/// stored in one byte: every level width here is at most 8 bits).
fn rle_run(out: &mut Vec<u8>, count: usize, value: u8) {
    write_varint(out, (count as u64) << 1);
    out.push(value);
}

fn len_i32(n: usize) -> Result<i32> {
    i32::try_from(n)
        .map_err(|_| Error::InvalidArgument(format!("a Parquet page of {n} bytes is too large")))
}

// Thrift compact protocol type codes.
const BOOL_TRUE: u8 = 1;
const BOOL_FALSE: u8 = 2;
const BYTE: u8 = 3;
const I16: u8 = 4;
const I32: u8 = 5;
const I64: u8 = 6;
const BINARY: u8 = 8;
const LIST: u8 = 9;
const STRUCT: u8 = 12;

/// Thrift's compact protocol, the few parts Parquet's metadata needs: structs written field
/// by field (each field header holds the delta from the previous field id), zigzag varints,
/// length-prefixed binaries, lists.
struct Thrift<'a> {
    buf: &'a mut Vec<u8>,
    last: i16,
    stack: Vec<i16>,
}

impl<'a> Thrift<'a> {
    fn new(buf: &'a mut Vec<u8>) -> Self {
        Thrift {
            buf,
            last: 0,
            stack: Vec::new(),
        }
    }

    fn field(&mut self, id: i16, kind: u8) {
        let delta = id - self.last;
        if (1..=15).contains(&delta) {
            self.buf.push(((delta as u8) << 4) | kind);
        } else {
            self.buf.push(kind);
            write_varint(self.buf, zigzag(id as i64));
        }
        self.last = id;
    }

    fn i8(&mut self, id: i16, v: u8) {
        self.field(id, BYTE);
        self.buf.push(v);
    }

    fn i16(&mut self, id: i16, v: i16) {
        self.field(id, I16);
        write_varint(self.buf, zigzag(v as i64));
    }

    fn i32(&mut self, id: i16, v: i32) {
        self.field(id, I32);
        write_varint(self.buf, zigzag(v as i64));
    }

    fn i64(&mut self, id: i16, v: i64) {
        self.field(id, I64);
        write_varint(self.buf, zigzag(v));
    }

    fn bool(&mut self, id: i16, v: bool) {
        self.field(id, if v { BOOL_TRUE } else { BOOL_FALSE });
    }

    fn binary(&mut self, id: i16, v: &[u8]) {
        self.field(id, BINARY);
        write_varint(self.buf, v.len() as u64);
        self.buf.extend_from_slice(v);
    }

    fn begin_struct(&mut self, id: i16) {
        self.field(id, STRUCT);
        self.stack.push(self.last);
        self.last = 0;
    }

    fn end_struct(&mut self) {
        self.stop();
        self.last = self.stack.pop().unwrap_or(0);
    }

    /// The STOP byte that ends a struct (and a top-level message).
    fn stop(&mut self) {
        self.buf.push(0);
    }

    fn list(&mut self, id: i16, kind: u8, n: usize) {
        self.field(id, LIST);
        if n < 15 {
            self.buf.push(((n as u8) << 4) | kind);
        } else {
            self.buf.push(0xF0 | kind);
            write_varint(self.buf, n as u64);
        }
    }

    /// A struct element of a list: its fields, then STOP.
    fn element(&mut self, fields: impl FnOnce(&mut Self)) {
        self.stack.push(self.last);
        self.last = 0;
        fields(self);
        self.end_struct();
    }

    fn list_i32(&mut self, v: i32) {
        write_varint(self.buf, zigzag(v as i64));
    }

    fn list_binary(&mut self, v: &[u8]) {
        write_varint(self.buf, v.len() as u64);
        self.buf.extend_from_slice(v);
    }
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_starts_and_ends_with_the_magic_and_its_footer_length() {
        let mut w = PackedRowsWriter::new(Vec::new(), 3, 16, Compression::Zstd(1), "test").unwrap();
        w.write_row_group(&[1u16, 2, 3, 4, 5, 6], &[3, 3]).unwrap();
        w.write_row_group(&[7u16, 8, 9], &[2]).unwrap();
        assert_eq!(w.rows(), 3);
        let bytes = w.finish().unwrap();
        assert_eq!(&bytes[..4], MAGIC);
        assert_eq!(&bytes[bytes.len() - 4..], MAGIC);
        let footer = u32::from_le_bytes(bytes[bytes.len() - 8..bytes.len() - 4].try_into().unwrap())
            as usize;
        assert!(footer > 0 && footer + 12 < bytes.len());
    }

    #[test]
    fn bad_rows_are_errors() {
        let mut w = PackedRowsWriter::new(Vec::new(), 3, 32, Compression::None, "test").unwrap();
        assert!(w.write_row_group(&[1u32, 2], &[2]).is_err()); // not a whole row
        assert!(w.write_row_group(&[1u32, 2, 3], &[4]).is_err()); // more real tokens than the row
        assert!(w.write_row_group(&[1u16, 2, 3], &[3]).is_err()); // 16-bit ids in a 32-bit file
        assert!(PackedRowsWriter::new(Vec::new(), 0, 32, Compression::None, "test").is_err());
        assert!(PackedRowsWriter::new(Vec::new(), 4, 8, Compression::None, "test").is_err());
    }

    #[test]
    fn the_bytes_do_not_depend_on_the_thread_count() {
        // Many pages a row group (rows of 2049 ids, 128 rows a page), with ids spread so zstd
        // has work: pages are compressed in parallel and must land in order, the same.
        let width = 2049;
        let ids: Vec<u32> = (0..width * 700)
            .map(|i| ((i as u64 * 2654435761) % 100_277) as u32)
            .collect();
        let lengths = vec![width as i32; 700];
        let write = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            pool.install(|| {
                let mut w = PackedRowsWriter::new(Vec::new(), width, 32, Compression::Zstd(1), "t")
                    .unwrap();
                w.write_row_group(&ids, &lengths).unwrap();
                w.write_row_group(&ids[..width * 3], &lengths[..3]).unwrap();
                w.finish().unwrap()
            })
        };
        let one = write(1);
        assert_eq!(one, write(4));
        assert!(one.len() < ids.len() * 4);
    }

    #[test]
    fn zigzag_and_varints_follow_the_compact_protocol() {
        // The protocol's definition: zigzag maps 0, -1, 1, -2 to 0, 1, 2, 3; varints are
        // little-endian groups of 7 bits with a continuation bit.
        assert_eq!([0, -1, 1, -2, i64::MIN].map(zigzag), [0, 1, 2, 3, u64::MAX]);
        let mut out = Vec::new();
        write_varint(&mut out, 300);
        assert_eq!(out, [0b1010_1100, 0b0000_0010]);
    }
}
