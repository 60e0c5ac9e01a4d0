//! The joiner's journal of pieces verified and written into the staging directory, which
//! makes an interrupted transfer resumable.
//!
//! One line per piece: `<crc> <offset> <len> <digest> <path>`, the first field a CRC32C of
//! the rest of the line. Lines are appended only after the piece's file data was synced,
//! so every line names bytes that are on disk; a torn or damaged line is skipped, and its
//! piece is simply sent again. Later lines for the same (path, offset) replace earlier ones.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use crate::frame::HeldPiece;

/// Where the journal lives and what it holds.
pub struct Journal {
    path: PathBuf,
    file: File,
}

fn line_of(piece: &HeldPiece) -> String {
    let body = format!(
        "{} {} {:016x} {}",
        piece.offset, piece.len, piece.digest, piece.path
    );
    format!("{:08x} {body}\n", crc32c::crc32c(body.as_bytes()))
}

fn parse_line(line: &str) -> Option<HeldPiece> {
    let (crc, body) = line.split_once(' ')?;
    if u32::from_str_radix(crc, 16).ok()? != crc32c::crc32c(body.as_bytes()) {
        return None;
    }
    let mut fields = body.splitn(4, ' ');
    let offset = fields.next()?.parse().ok()?;
    let len = fields.next()?.parse().ok()?;
    let digest = u64::from_str_radix(fields.next()?, 16).ok()?;
    let path = fields.next()?.to_string();
    Some(HeldPiece {
        path,
        offset,
        len,
        digest,
    })
}

impl Journal {
    /// Opens (creating) the journal at `path` and returns it with the pieces it lists, the
    /// latest per (path, offset). `skipped` counts damaged lines.
    pub fn open(path: &Path) -> io::Result<(Journal, Vec<HeldPiece>, usize)> {
        let mut held: BTreeMap<(String, u64), HeldPiece> = BTreeMap::new();
        let mut skipped = 0;
        if let Ok(existing) = File::open(path) {
            for line in BufReader::new(existing).split(b'\n') {
                let line = line?;
                match std::str::from_utf8(&line).ok().and_then(parse_line) {
                    Some(piece) => {
                        held.insert((piece.path.clone(), piece.offset), piece);
                    }
                    None => skipped += 1,
                }
            }
        }
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok((
            Journal {
                path: path.to_path_buf(),
                file,
            },
            held.into_values().collect(),
            skipped,
        ))
    }

    /// Appends pieces whose data is already synced, and syncs the journal.
    pub fn append(&mut self, pieces: &[HeldPiece]) -> io::Result<()> {
        if pieces.is_empty() {
            return Ok(());
        }
        let text: String = pieces.iter().map(line_of).collect();
        self.file.write_all(text.as_bytes())?;
        self.file.sync_data()
    }

    /// Removes the journal (the transfer is complete).
    pub fn remove(self) -> io::Result<()> {
        drop(self.file);
        match fs::remove_file(&self.path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn piece(path: &str, offset: u64, digest: u64) -> HeldPiece {
        HeldPiece {
            path: path.into(),
            offset,
            len: 10,
            digest,
        }
    }

    #[test]
    fn reopening_lists_the_latest_piece_per_position_and_skips_damage() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j");
        let (mut journal, held, _) = Journal::open(&path).unwrap();
        assert!(held.is_empty());
        journal
            .append(&[piece("a b/c", 0, 1), piece("x", 0, 2), piece("a b/c", 0, 3)])
            .unwrap();
        drop(journal);
        let mut text = fs::read_to_string(&path).unwrap();
        text.push_str("deadbeef 0 10 0000000000000009 torn");
        text = text.replacen("x\n", "y\n", 1); // damage the line of "x"
        fs::write(&path, text).unwrap();
        let (_, held, skipped) = Journal::open(&path).unwrap();
        assert_eq!(held, vec![piece("a b/c", 0, 3)]);
        assert_eq!(skipped, 2);
    }
}
