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
use crate::xbstream::check_relative_path;
use crate::PIECE_BYTES;

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
    let len: u32 = fields.next()?.parse().ok()?;
    let digest = u64::from_str_radix(fields.next()?, 16).ok()?;
    let path = fields.next()?.to_string();
    // What this joiner wrote is never longer than a piece nor outside the staging
    // directory; anything else is damage, and must not size a buffer or name a file.
    if u64::from(len) > PIECE_BYTES || check_relative_path(&path).is_err() {
        return None;
    }
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

/// Fuzz targets for the journal's reader: no line or file content panics it, and every piece
/// it lists is one the joiner could have written (a piece's length at most, a path inside
/// the staging directory), so none can size a buffer or name a file outside. `scripts/fuzz.sh`
/// runs them longer.
#[cfg(test)]
mod fuzz {
    use proptest::prelude::*;

    use super::*;
    use crate::frame::fuzz::damage;

    /// Cases per target in a plain `cargo test`; `PROPTEST_CASES` overrides it.
    const FUZZ_CASES: u32 = 5000;
    /// Cases of the target that writes and reopens a journal file per case.
    const FUZZ_CASES_FILE: u32 = 1000;

    fn piece() -> impl Strategy<Value = HeldPiece> {
        (
            prop_oneof![4 => "[a-z]{1,5}( [a-z]{1,3})?(/[a-z.]{1,5}){0,2}", 1 => ".{0,8}"],
            any::<u64>(),
            prop_oneof![0..=PIECE_BYTES as u32, any::<u32>()],
            any::<u64>(),
        )
            .prop_map(|(path, offset, len, digest)| HeldPiece {
                path,
                offset,
                len,
                digest,
            })
    }

    /// A line as [`line_of`] writes it, with the fields as given (any text) and a checksum
    /// that matches.
    fn sealed_line(fields: &str) -> String {
        format!("{:08x} {fields}", crc32c::crc32c(fields.as_bytes()))
    }

    /// A new file name for one case, in a directory all cases share. Never the same name
    /// twice: rewriting one file in place makes some file systems flush it on every close.
    fn scratch_file(what: &str) -> PathBuf {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        scratch_dir().join(format!("{what}-{n}"))
    }

    /// A directory for the files of one case after another.
    fn scratch_dir() -> &'static Path {
        static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
        DIR.get_or_init(|| tempfile::tempdir().expect("tempdir"))
            .path()
    }

    fn plausible(piece: &HeldPiece) -> bool {
        u64::from(piece.len) <= PIECE_BYTES && check_relative_path(&piece.path).is_ok()
    }

    /// What every parsed line must satisfy.
    fn check_line(line: &str) -> Result<(), TestCaseError> {
        if let Some(piece) = parse_line(line) {
            prop_assert!(plausible(&piece), "{:?}", piece);
            let again = line_of(&piece);
            prop_assert_eq!(parse_line(again.trim_end_matches('\n')), Some(piece));
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(fuzzing::config(FUZZ_CASES))]

        /// Arbitrary text, and arbitrary fields under a matching checksum: a piece only if
        /// it is plausible, and then it writes and reads back the same.
        #[test]
        fn fuzz_sst_journal_line_arbitrary(
            text in ".{0,60}",
            fields in "[0-9a-f +-]{0,40}( .{0,10})?",
            seal in any::<bool>(),
        ) {
            check_line(&text)?;
            let line = if seal { sealed_line(&fields) } else { fields };
            check_line(&line)?;
        }

        /// Real lines, damaged and resealed or not: read back as written when undamaged and
        /// plausible, never an implausible piece.
        #[test]
        fn fuzz_sst_journal_line_mutated(
            piece in piece(),
            damages in proptest::collection::vec(damage(), 0..3),
            seal in any::<bool>(),
        ) {
            let line = line_of(&piece);
            let line = line.trim_end_matches('\n');
            if damages.is_empty() {
                let parsed = parse_line(line);
                prop_assert_eq!(parsed.as_ref(), plausible(&piece).then_some(&piece));
            }
            let mut bytes = line.as_bytes().to_vec();
            fuzzing::apply(&mut bytes, &damages);
            let damaged = String::from_utf8_lossy(&bytes);
            check_line(&damaged)?;
            if seal {
                if let Some((_, fields)) = damaged.split_once(' ') {
                    check_line(&sealed_line(fields))?;
                }
            }
        }
    }

    proptest! {
        #![proptest_config(fuzzing::config(FUZZ_CASES_FILE))]

        /// Whole journal files, damaged: opening lists plausible pieces only, one per
        /// (path, offset), and counts every other non-empty line as skipped.
        #[test]
        fn fuzz_sst_journal_file_damaged(
            pieces in proptest::collection::vec(piece(), 0..8),
            damages in proptest::collection::vec(damage(), 0..4),
        ) {
            let mut bytes: Vec<u8> = pieces.iter().flat_map(|p| line_of(p).into_bytes()).collect();
            fuzzing::apply(&mut bytes, &damages);
            let path = scratch_file("journal");
            fs::write(&path, &bytes).expect("write");
            let (journal, held, skipped) = Journal::open(&path).expect("open");
            journal.remove().expect("rm");
            prop_assert!(held.iter().all(plausible));
            let mut keys: Vec<(&str, u64)> = held.iter().map(|p| (p.path.as_str(), p.offset)).collect();
            keys.dedup();
            prop_assert_eq!(keys.len(), held.len());
            let lines = bytes.split(|b| *b == b'\n').count();
            prop_assert!(held.len() + skipped <= lines);
            if damages.is_empty() {
                let good = pieces.iter().filter(|p| plausible(p)).count();
                prop_assert_eq!(skipped, pieces.len() - good);
            }
        }
    }

    /// A checksummed line claiming a 4 GiB piece, or a path outside the staging directory,
    /// is damage: the resumed joiner would have read that many bytes, or that file.
    #[test]
    fn implausible_lines_are_damage() {
        for fields in [
            "0 4294967295 0000000000000001 db/t.ibd",
            "0 10 0000000000000001 /etc/shadow",
            "0 10 0000000000000001 ../../etc/shadow",
        ] {
            assert_eq!(parse_line(&sealed_line(fields)), None, "{fields}");
        }
        let fine = sealed_line("0 1048576 0000000000000001 db/t.ibd");
        assert_eq!(parse_line(&fine).map(|p| p.len), Some(1 << 20));
    }
}
