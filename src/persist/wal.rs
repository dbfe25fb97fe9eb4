//! The write-ahead log in front of the store (DESIGN.md §6).
//!
//! Group commit writes each batch of changes as one record appended to a log segment, and
//! `appendfsync` decides when the segment is fsynced — one sequential append per commit, as
//! Redis's AOF does, instead of copying a B-tree page per key touched. The checkpointer
//! applies the logged batches to redb in large durable transactions (about once a second) and
//! records the last record number it applied in the store's `meta` table, in the same
//! transaction; segments wholly at or below that number are deleted.
//!
//! Recovery replays, in order, the records above the store's applied number, so a crash at
//! any point — mid-append, mid-checkpoint, between a checkpoint and the deletion of its
//! segments — neither loses a logged batch nor applies one twice.
//!
//! Format (part of the file format; see [`super::layout::FORMAT_VERSION`]): directory
//! `<dir>/wal/`, segments named `<first record number, 20 digits>.wal`, each a sequence of
//! records `[payload length u32 LE][CRC-32 (IEEE) of the rest u32 LE][record number u64 LE]
//! [payload]`, the payload being [`super::codec::encode`] of the batch. A record that is
//! short or fails its checksum ends the log (a torn final append).

use super::codec;
use super::load::LoadOptions;
use super::{PersistError, Store};
use crate::engine::change::Change;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

type Result<T> = std::result::Result<T, PersistError>;

pub const DIR: &str = "wal";
const HEADER: usize = 16;
/// Records larger than this are refused as corrupt on replay (a batch is far smaller).
const MAX_RECORD: usize = 1 << 31;

/// The log of a running server: the segment being appended to and the older ones that are
/// not yet wholly checkpointed.
pub struct Wal {
    dir: PathBuf,
    file: File,
    cur_first: u64,
    cur_bytes: u64,
    /// Older segments: (first record number, path), ascending.
    older: Vec<(u64, PathBuf)>,
    next_rec: u64,
    buf: Vec<u8>,
    /// Bytes appended since the last `sync`.
    unsynced: bool,
}

fn io(e: std::io::Error) -> PersistError {
    PersistError::Io(e.to_string())
}

fn segment_path(dir: &Path, first: u64) -> PathBuf {
    dir.join(format!("{first:020}.wal"))
}

/// The segments in `dir` (first record number, path), ascending.
fn segments(dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let mut out = Vec::new();
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(io(e)),
    };
    for entry in rd {
        let entry = entry.map_err(io)?;
        let name = entry.file_name();
        let Some(first) = name
            .to_str()
            .and_then(|n| n.strip_suffix(".wal"))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        out.push((first, entry.path()));
    }
    out.sort();
    Ok(out)
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(io)
}

impl Wal {
    /// Starts a fresh segment whose first record will be `next_rec` (recovery has replayed
    /// and removed every older segment).
    pub fn create(store_dir: &Path, next_rec: u64) -> Result<Wal> {
        let dir = store_dir.join(DIR);
        std::fs::create_dir_all(&dir).map_err(io)?;
        let file = Self::new_segment(&dir, next_rec)?;
        Ok(Wal {
            dir,
            file,
            cur_first: next_rec,
            cur_bytes: 0,
            older: Vec::new(),
            next_rec,
            buf: Vec::new(),
            unsynced: false,
        })
    }

    fn new_segment(dir: &Path, first: u64) -> Result<File> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(segment_path(dir, first))
            .map_err(io)?;
        // The new name must survive a power loss before records in it are promised durable.
        sync_dir(dir)?;
        Ok(file)
    }

    /// Appends `changes` as one record (written, not yet fsynced); returns its number.
    pub fn append(&mut self, changes: &[Change]) -> Result<u64> {
        let rec = self.next_rec;
        self.buf.clear();
        self.buf.extend_from_slice(&[0u8; HEADER]);
        codec::encode(changes, &mut self.buf);
        seal(&mut self.buf, rec);
        if let Err(e) = self.file.write_all(&self.buf) {
            // A partial append would be followed by later records: cut it off.
            let _ = self.file.set_len(self.cur_bytes);
            return Err(io(e));
        }
        self.cur_bytes += self.buf.len() as u64;
        self.next_rec += 1;
        self.unsynced = true;
        if self.buf.capacity() > 1 << 24 {
            self.buf = Vec::new();
        }
        Ok(rec)
    }

    /// Makes every appended record durable (fdatasync).
    pub fn sync(&mut self) -> Result<()> {
        if self.unsynced {
            self.file.sync_data().map_err(io)?;
            self.unsynced = false;
        }
        Ok(())
    }

    /// The number the next record gets.
    pub fn next_rec(&self) -> u64 {
        self.next_rec
    }

    /// Whether records were appended since the last `sync`.
    pub fn unsynced(&self) -> bool {
        self.unsynced
    }

    /// Bytes in the log (all segments).
    pub fn bytes(&self) -> u64 {
        self.cur_bytes
            + self
                .older
                .iter()
                .filter_map(|(_, p)| std::fs::metadata(p).ok())
                .map(|m| m.len())
                .sum::<u64>()
    }

    /// The store now holds every record up to `applied`: segments wholly at or below it are
    /// deleted, and the current one is closed (fsynced) and a new one started if it holds
    /// any such record, so it can go at the next checkpoint.
    pub fn checkpointed(&mut self, applied: u64) -> Result<()> {
        if self.cur_bytes > 0 && applied >= self.cur_first {
            self.sync()?;
            let file = Self::new_segment(&self.dir, self.next_rec)?;
            let old = std::mem::replace(&mut self.file, file);
            drop(old);
            self.older
                .push((self.cur_first, segment_path(&self.dir, self.cur_first)));
            self.cur_first = self.next_rec;
            self.cur_bytes = 0;
        }
        // Segment i ends where segment i+1 (or the current one) begins.
        let mut keep = Vec::new();
        let firsts: Vec<u64> = self
            .older
            .iter()
            .map(|(f, _)| *f)
            .skip(1)
            .chain(std::iter::once(self.cur_first))
            .collect();
        for ((first, path), next_first) in std::mem::take(&mut self.older).into_iter().zip(firsts) {
            if next_first.saturating_sub(1) <= applied {
                std::fs::remove_file(&path).map_err(io)?;
            } else {
                keep.push((first, path));
            }
        }
        self.older = keep;
        Ok(())
    }
}

/// What recovery found in the log.
#[derive(Debug, Default, Clone, Copy)]
pub struct Recovered {
    /// Records (batches) applied to the store, and the changes in them.
    pub records: u64,
    pub changes: u64,
    /// A torn or corrupt record ended the log early.
    pub torn: bool,
    /// The number the next record gets.
    pub next_rec: u64,
}

/// Applies to `store` every logged record above the store's applied number, in order, then
/// deletes the log. Run before loading the keyspace and before `Wal::create`.
pub fn recover(store: &Store, opts: &LoadOptions) -> Result<Recovered> {
    let dir = store
        .path()
        .parent()
        .map(|p| p.join(DIR))
        .unwrap_or_else(|| PathBuf::from(DIR));
    let applied = store.wal_applied()?;
    let mut out = Recovered {
        next_rec: applied + 1,
        ..Recovered::default()
    };
    let segs = segments(&dir)?;
    let mut pending: Vec<Change> = Vec::new();
    let mut last = applied;
    'segments: for (_, path) in &segs {
        let mut data = Vec::new();
        File::open(path)
            .and_then(|mut f| f.read_to_end(&mut data))
            .map_err(io)?;
        let segment = scan(&data);
        for (rec, payload) in segment.records {
            if rec > last {
                let changes = codec::decode(payload, opts)?;
                out.records += 1;
                out.changes += changes.len() as u64;
                pending.extend(changes);
                last = rec;
                if pending.len() >= 100_000 {
                    store.apply_logged(&pending, last)?;
                    pending.clear();
                }
            }
        }
        if segment.torn {
            out.torn = true;
            break 'segments;
        }
    }
    if !pending.is_empty() || last > applied {
        store.apply_logged(&pending, last)?;
    }
    if out.torn {
        tracing::warn!("write-ahead log ends with a torn or corrupt record; replayed up to it");
    }
    for (_, path) in &segs {
        std::fs::remove_file(path).map_err(io)?;
    }
    out.next_rec = last + 1;
    Ok(out)
}

/// The records of one segment, up to the first torn or corrupt one.
#[derive(Debug, Default)]
pub struct Segment<'a> {
    /// (record number, payload), in file order.
    pub records: Vec<(u64, &'a [u8])>,
    /// Bytes taken by `records` (the offset of the first byte not read).
    pub end: usize,
    /// A short record or a checksum mismatch ended the segment before its last byte.
    pub torn: bool,
}

/// Splits a segment's bytes into records (the framing only; payloads are not decoded).
pub fn scan(data: &[u8]) -> Segment<'_> {
    let mut out = Segment::default();
    while out.end < data.len() {
        let at = out.end;
        let Some(h) = data.get(at..at + HEADER) else {
            out.torn = true;
            break;
        };
        let len = u32::from_le_bytes(h[0..4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_le_bytes(h[4..8].try_into().expect("4 bytes"));
        let rec = u64::from_le_bytes(h[8..16].try_into().expect("8 bytes"));
        let end = at + HEADER + len;
        if len > MAX_RECORD || end > data.len() || crc32(&data[at + 8..end]) != crc {
            out.torn = true;
            break;
        }
        out.records.push((rec, &data[at + HEADER..end]));
        out.end = end;
    }
    out
}

/// One record as [`Wal::append`] frames it (for tests and fuzzing seeds).
pub fn frame(rec: u64, changes: &[Change]) -> Vec<u8> {
    let mut buf = vec![0u8; HEADER];
    codec::encode(changes, &mut buf);
    seal(&mut buf, rec);
    buf
}

/// Fills in the header of a record whose payload follows `HEADER` zero bytes in `buf`.
fn seal(buf: &mut [u8], rec: u64) {
    let len = (buf.len() - HEADER) as u32;
    buf[0..4].copy_from_slice(&len.to_le_bytes());
    buf[8..16].copy_from_slice(&rec.to_le_bytes());
    let crc = crc32(&buf[8..]);
    buf[4..8].copy_from_slice(&crc.to_le_bytes());
}

/// CRC-32 (IEEE 802.3, reflected: the zlib/PNG one), which every WAL file on disk carries.
pub(crate) fn crc32(data: &[u8]) -> u32 {
    crc32fast::hash(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_matches_the_standard_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
        // Long enough for crc32fast's folding (SIMD) path, which must agree with zlib's.
        assert_eq!(crc32(&[b'a'; 1000]), 0x9A38_DA03);
    }
}
