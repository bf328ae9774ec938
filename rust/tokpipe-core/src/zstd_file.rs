//! zstd files as byte streams, for the data pipeline's line readers
//! (`tokpipe.pipeline.readers.lines`).
//!
//! Output is produced as it is asked for, one caller's buffer at a time. Decompressing a
//! whole input chunk or frame at once is what Python's `zstandard` offers, and it is
//! unbounded: a few bytes of a zstd frame can stand for megabytes of repeated data, and a
//! 128 KB chunk of a crafted file for gigabytes. Here a read never holds more than the
//! caller's buffer and the decoder's window.
//!
//! Frames follow one another (`zstd -c a b > ab.zst`, pzstd's output) and are read as one
//! stream. A file that ends inside a frame (a truncated download) is an error, not a clean
//! end: the zstd crate's reader reports an incomplete frame, where Python's `zstandard`
//! stream readers return a quiet end of stream and the rest of the file would vanish.

use crate::error::{Error, Result};
use std::fs::File;
use std::io::{BufReader, Read, Seek};
use std::path::{Path, PathBuf};

/// An open zstd file, decompressed as it is read.
pub struct ZstdFile {
    path: PathBuf,
    decoder: zstd::Decoder<'static, BufReader<File>>,
    /// An error met after a read had produced bytes: returned by the next read, so the
    /// bytes before the damage reach the caller first.
    pending: Option<std::io::Error>,
}

/// The most output one decoder call is asked for. A decoder call that fails loses what it
/// decoded, so a read fills the caller's buffer in pieces of this size, and damage costs at
/// most one piece of the good bytes before it.
const PIECE: usize = 16 << 10;

impl ZstdFile {
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let file = File::open(&path).map_err(|e| Error::io(&path, e))?;
        let decoder = zstd::Decoder::new(file).map_err(|e| Error::io(&path, e))?;
        Ok(ZstdFile {
            path,
            decoder,
            pending: None,
        })
    }

    /// Decompressed bytes into `buf`, filled but at the end of the stream or before damage:
    /// how many (0 only at the end of the last frame). A corrupt frame, or a file that ends
    /// inside one, is an [`Error::Io`] naming the file, returned once the bytes decoded
    /// before it have been.
    pub fn read(&mut self, buf: &mut [u8]) -> Result<usize> {
        if let Some(error) = self.pending.take() {
            return Err(Error::io(&self.path, error));
        }
        let mut filled = 0;
        while filled < buf.len() {
            let end = buf.len().min(filled + PIECE);
            match self.decoder.read(&mut buf[filled..end]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if filled > 0 => {
                    self.pending = Some(e);
                    break;
                }
                Err(e) => return Err(Error::io(&self.path, e)),
            }
        }
        Ok(filled)
    }

    /// The bytes of the compressed file read so far: what a run's progress counts, since a
    /// task's size is its file's. A little ahead of the output, as the decoder reads its
    /// input a buffer at a time.
    pub fn compressed_position(&self) -> Result<u64> {
        let mut file: &File = self.decoder.get_ref().get_ref();
        file.stream_position().map_err(|e| Error::io(&self.path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(file: &mut ZstdFile, chunk: usize) -> (Vec<u8>, Option<Error>) {
        let mut out = Vec::new();
        let mut buf = vec![0u8; chunk];
        loop {
            match file.read(&mut buf) {
                Ok(0) => return (out, None),
                Ok(n) => {
                    assert!(n <= chunk);
                    out.extend_from_slice(&buf[..n]);
                }
                Err(e) => return (out, Some(e)),
            }
        }
    }

    fn temp_file(name: &str, bytes: &[u8]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tokpipe-zstd-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }

    #[test]
    fn the_compressed_position_grows_to_the_file_size() {
        let text = b"a line of text\n".repeat(100_000);
        let compressed = zstd::encode_all(&text[..], 3).unwrap();
        let path = temp_file("position.zst", &compressed);
        let mut file = ZstdFile::open(&path).unwrap();
        assert_eq!(file.compressed_position().unwrap(), 0);
        let mut buf = vec![0u8; 4096];
        file.read(&mut buf).unwrap();
        let early = file.compressed_position().unwrap();
        assert!(early > 0 && early <= compressed.len() as u64);
        let (rest, error) = read_all(&mut file, 1 << 16);
        assert!(error.is_none() && rest.len() + 4096 == text.len());
        assert_eq!(file.compressed_position().unwrap(), compressed.len() as u64);
    }

    #[test]
    fn concatenated_frames_read_as_one_stream_in_small_reads() {
        let (a, b) = (
            b"first frame\n".repeat(1000),
            b"second frame\n".repeat(1000),
        );
        let mut both = zstd::encode_all(&a[..], 3).unwrap();
        both.extend(zstd::encode_all(&b[..], 19).unwrap());
        let path = temp_file("two.zst", &both);
        let (out, error) = read_all(&mut ZstdFile::open(&path).unwrap(), 777);
        assert!(error.is_none());
        assert_eq!(out, [a, b].concat());
    }

    #[test]
    fn a_bomb_is_read_a_buffer_at_a_time() {
        // 256 MiB of zeros compress to a few kilobytes; each read still returns at most the
        // caller's buffer.
        let zeros = vec![0u8; 256 << 20];
        let bomb = zstd::encode_all(&zeros[..], 3).unwrap();
        assert!(bomb.len() < 64 << 10);
        drop(zeros);
        let path = temp_file("bomb.zst", &bomb);
        let mut file = ZstdFile::open(&path).unwrap();
        let mut buf = vec![0u8; 1 << 16];
        let mut total = 0usize;
        loop {
            let n = file.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            total += n;
        }
        assert_eq!(total, 256 << 20);
    }

    #[test]
    fn damage_inside_a_frame_keeps_the_bytes_before_it() {
        let data: Vec<u8> = (0..40_000)
            .flat_map(|i| format!("{{\"text\": \"line {i}\"}}\n").into_bytes())
            .collect();
        let good = zstd::encode_all(&data[..], 3).unwrap();
        // Damage past the middle that the decoder notices (not every damaged byte is: zstd
        // frames carry no checksum by default, and some damage decodes to other bytes).
        let compressed = (0..64)
            .map(|k| {
                let mut bad = good.clone();
                let at = good.len() * 3 / 4 + k * 97;
                bad[at..at + 16].fill(0xff);
                bad
            })
            .find(|bad| zstd::decode_all(&bad[..]).is_err())
            .expect("some damage is noticed");
        let path = temp_file("damaged.zst", &compressed);
        // One read as large as the file: the bytes before the damage still come first.
        let (out, error) = read_all(&mut ZstdFile::open(&path).unwrap(), 8 << 20);
        assert!(error.is_some());
        assert!(
            out.len() > data.len() / 2,
            "{} of {}",
            out.len(),
            data.len()
        );
        assert!(data.starts_with(&out));
    }

    #[test]
    fn a_truncated_file_is_an_error_after_its_whole_bytes() {
        let data: Vec<u8> = (0..20_000)
            .flat_map(|i| format!("{{\"text\": \"line {i}\"}}\n").into_bytes())
            .collect();
        let compressed = zstd::encode_all(&data[..], 3).unwrap();
        let path = temp_file("cut.zst", &compressed[..compressed.len() / 2]);
        let (out, error) = read_all(&mut ZstdFile::open(&path).unwrap(), 4096);
        let error = error.expect("a truncated file must not end cleanly");
        assert!(error.to_string().contains("cut.zst"), "{error}");
        assert!(!out.is_empty() && data.starts_with(&out));
    }
}
