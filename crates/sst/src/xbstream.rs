//! A reader for the xbstream format that `mariadb-backup --backup --stream=xbstream`
//! writes: a sequence of chunks, each naming a file and carrying either bytes at an offset
//! in it or the end of that file.
//!
//! Chunk layout (little-endian): 8-byte magic `XBSTCK01`, flags (1 byte), type (1 byte:
//! `P` payload, `E` end of file), path length (u32) and path; a payload chunk then has its
//! length (u64), its offset (u64), a checksum (u32, zlib CRC-32, not checked here: the pipe
//! from the local mariadb-backup is not where corruption is expected, and every piece gets
//! its own CRC32C before it leaves the donor) and the bytes.

use std::io::{self, Read};

use crate::SstError;

const MAGIC: &[u8; 8] = b"XBSTCK01";
/// Chunk flag: a reader may skip this chunk if it does not know its type.
const FLAG_IGNORABLE: u8 = 0x01;
/// Longest path accepted (the server's own limit is 512).
const MAX_PATH: u32 = 512;
/// Largest chunk accepted.
const MAX_CHUNK: u64 = 256 << 20;
/// What a chunk's buffer reserves before its bytes arrive: mariadb-backup's chunks fit, so
/// they are read in place without growing the buffer, while a damaged length field cannot
/// make the reader reserve [`MAX_CHUNK`] up front.
const CHUNK_RESERVE: u64 = 16 << 20;
const _: () = assert!(CHUNK_RESERVE <= MAX_CHUNK);

/// One chunk.
#[derive(Debug, PartialEq, Eq)]
pub enum Chunk {
    /// Bytes of `path` at `offset`.
    Payload {
        /// Path relative to the backup's root.
        path: String,
        /// Offset in the file.
        offset: u64,
        /// The bytes.
        data: Vec<u8>,
    },
    /// `path` is complete (the only chunk of an empty file).
    EndOfFile {
        /// Path relative to the backup's root.
        path: String,
    },
}

/// Reads chunks from a stream.
pub struct XbReader<R> {
    input: R,
    position: u64,
}

impl<R: Read> XbReader<R> {
    /// Reads from `input`.
    pub fn new(input: R) -> Self {
        XbReader { input, position: 0 }
    }

    /// The next chunk, or `None` at the end of the stream.
    pub fn next_chunk(&mut self) -> Result<Option<Chunk>, SstError> {
        loop {
            let mut head = [0u8; 14];
            let got = read_up_to(&mut self.input, &mut head)
                .map_err(|e| SstError::io("reading mariadb-backup's stream", e))?;
            if got == 0 {
                return Ok(None);
            }
            let at = self.position;
            if got < head.len() {
                return Err(self.bad(at, "the stream ends inside a chunk header"));
            }
            if &head[..8] != MAGIC {
                return Err(self.bad(at, "a chunk does not start with XBSTCK01"));
            }
            let flags = head[8];
            let kind = head[9];
            let path_len = u32::from_le_bytes(head[10..14].try_into().expect("4 bytes"));
            if path_len == 0 || path_len > MAX_PATH {
                return Err(self.bad(at, "a chunk's path length is out of range"));
            }
            let mut path = vec![0u8; path_len as usize];
            self.read_exact(&mut path, at)?;
            self.position += 14 + u64::from(path_len);
            let path =
                String::from_utf8(path).map_err(|_| self.bad(at, "a chunk's path is not UTF-8"))?;
            check_relative_path(&path).map_err(|why| self.bad(at, &why))?;
            match kind {
                b'E' => return Ok(Some(Chunk::EndOfFile { path })),
                b'P' => {
                    let mut fields = [0u8; 20];
                    self.read_exact(&mut fields, at)?;
                    let len = u64::from_le_bytes(fields[..8].try_into().expect("8 bytes"));
                    let offset = u64::from_le_bytes(fields[8..16].try_into().expect("8 bytes"));
                    if len > MAX_CHUNK {
                        return Err(self.bad(at, "a chunk is larger than 256 MiB"));
                    }
                    let data = self.read_payload(len, at)?;
                    self.position += 20 + len;
                    return Ok(Some(Chunk::Payload { path, offset, data }));
                }
                _ if flags & FLAG_IGNORABLE != 0 => {
                    // A chunk type newer than this reader that its writer marked as safe to
                    // skip; its layout is unknown, so it must be the payload layout.
                    let mut fields = [0u8; 20];
                    self.read_exact(&mut fields, at)?;
                    let len = u64::from_le_bytes(fields[..8].try_into().expect("8 bytes"));
                    if len > MAX_CHUNK {
                        return Err(self.bad(at, "an ignorable chunk is larger than 256 MiB"));
                    }
                    let skipped = io::copy(&mut (&mut self.input).take(len), &mut io::sink())
                        .map_err(|e| SstError::io("skipping an ignorable chunk", e))?;
                    if skipped < len {
                        return Err(self.bad(at, "the stream ends inside a chunk"));
                    }
                    self.position += 20 + len;
                }
                other => {
                    return Err(self.bad(
                        at,
                        &format!(
                        "unknown chunk type 0x{other:02x}: is mariadb-backup newer than this tool?"
                    ),
                    ))
                }
            }
        }
    }

    fn read_exact(&mut self, buf: &mut [u8], at: u64) -> Result<(), SstError> {
        self.input
            .read_exact(buf)
            .map_err(|e| self.read_error(e, at))
    }

    /// A chunk's `len` bytes, read straight into their buffer (no zero-filling, no copy
    /// as it grows).
    fn read_payload(&mut self, len: u64, at: u64) -> Result<Vec<u8>, SstError> {
        let mut data = Vec::with_capacity(len.min(CHUNK_RESERVE) as usize);
        (&mut self.input)
            .take(len)
            .read_to_end(&mut data)
            .map_err(|e| self.read_error(e, at))?;
        if data.len() as u64 != len {
            return Err(self.bad(at, "the stream ends inside a chunk"));
        }
        Ok(data)
    }

    fn read_error(&self, error: io::Error, at: u64) -> SstError {
        if error.kind() == io::ErrorKind::UnexpectedEof {
            self.bad(at, "the stream ends inside a chunk")
        } else {
            SstError::io("reading mariadb-backup's stream", error)
        }
    }

    fn bad(&self, at: u64, what: &str) -> SstError {
        SstError::Tool(format!(
            "mariadb-backup's xbstream output is malformed at byte {at}: {what}"
        ))
    }
}

/// Fills `buf` as far as the input allows; returns the bytes read (less only at the end).
fn read_up_to(input: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match input.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// A path that may be created under the staging directory: relative, no `..`, no empty or
/// `.` components, no NUL or newline (the journal is line-based).
pub fn check_relative_path(path: &str) -> Result<(), String> {
    if path.starts_with('/') {
        return Err(format!("path {path:?} is absolute"));
    }
    if path.contains(['\0', '\n', '\r']) {
        return Err(format!("path {path:?} contains a control character"));
    }
    if path
        .split('/')
        .any(|part| part.is_empty() || part == "." || part == "..")
    {
        return Err(format!("path {path:?} has an empty, '.' or '..' component"));
    }
    Ok(())
}

#[cfg(test)]
pub(crate) fn encode_payload(path: &str, offset: u64, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    out.push(0);
    out.push(b'P');
    out.extend_from_slice(&(path.len() as u32).to_le_bytes());
    out.extend_from_slice(path.as_bytes());
    out.extend_from_slice(&(data.len() as u64).to_le_bytes());
    out.extend_from_slice(&offset.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(data);
    out
}

#[cfg(test)]
pub(crate) fn encode_end(path: &str) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    out.push(0);
    out.push(b'E');
    out.extend_from_slice(&(path.len() as u32).to_le_bytes());
    out.extend_from_slice(path.as_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_payload_and_end_chunks() {
        let mut stream = encode_payload("db/t.ibd", 0, b"abc");
        stream.extend(encode_payload("db/t.ibd", 3, b"de"));
        stream.extend(encode_end("db/t.ibd"));
        stream.extend(encode_end("empty.frm"));
        let mut reader = XbReader::new(&stream[..]);
        assert_eq!(
            reader.next_chunk().unwrap(),
            Some(Chunk::Payload {
                path: "db/t.ibd".into(),
                offset: 0,
                data: b"abc".to_vec()
            })
        );
        assert!(matches!(
            reader.next_chunk().unwrap(),
            Some(Chunk::Payload { offset: 3, .. })
        ));
        assert!(matches!(
            reader.next_chunk().unwrap(),
            Some(Chunk::EndOfFile { .. })
        ));
        assert_eq!(
            reader.next_chunk().unwrap(),
            Some(Chunk::EndOfFile {
                path: "empty.frm".into()
            })
        );
        assert_eq!(reader.next_chunk().unwrap(), None);
    }

    #[test]
    fn truncation_and_escaping_paths_are_errors() {
        let stream = encode_payload("db/t.ibd", 0, b"abcdef");
        for cut in 1..stream.len() {
            assert!(
                XbReader::new(&stream[..cut]).next_chunk().is_err(),
                "cut at {cut}"
            );
        }
        for path in ["../etc/passwd", "/etc/passwd", "a//b", "a/./b"] {
            let stream = encode_payload(path, 0, b"x");
            assert!(XbReader::new(&stream[..]).next_chunk().is_err(), "{path}");
        }
    }
}

/// Fuzz targets for [`XbReader`]: no byte sequence panics it, no length field makes it
/// allocate ahead of the bytes, and every chunk it returns encodes and reads back the same.
/// `scripts/fuzz.sh` runs them longer.
#[cfg(test)]
mod fuzz {
    use fuzzing::Trickle;
    use proptest::prelude::*;

    use super::*;
    use crate::frame::fuzz::damage;

    /// Cases per target in a plain `cargo test`; `PROPTEST_CASES` overrides it.
    const FUZZ_CASES: u32 = 5000;

    /// What to put in a stream.
    #[derive(Clone, Debug)]
    enum Spec {
        Payload(String, u64, Vec<u8>),
        End(String),
        /// A chunk of an unknown type marked ignorable, with its payload.
        Ignorable(u8, Vec<u8>),
    }

    fn spec() -> impl Strategy<Value = Spec> {
        let path = prop_oneof![4 => "[a-z]{1,6}(/[a-z.]{1,6}){0,2}", 1 => ".{0,8}"];
        prop_oneof![
            4 => (path.clone(), any::<u64>(), proptest::collection::vec(any::<u8>(), 0..40))
                .prop_map(|(path, offset, data)| Spec::Payload(path, offset, data)),
            2 => path.prop_map(Spec::End),
            1 => (b'a'..=b'z', proptest::collection::vec(any::<u8>(), 0..20))
                .prop_map(|(kind, data)| Spec::Ignorable(kind, data)),
        ]
    }

    fn encode(spec: &Spec, out: &mut Vec<u8>) {
        match spec {
            Spec::Payload(path, offset, data) => out.extend(encode_payload(path, *offset, data)),
            Spec::End(path) => out.extend(encode_end(path)),
            Spec::Ignorable(kind, data) => {
                let mut chunk = encode_payload("x", 0, data);
                chunk[8] = FLAG_IGNORABLE;
                chunk[9] = *kind;
                out.extend(chunk);
            }
        }
    }

    fn expected(spec: &Spec) -> Option<Chunk> {
        match spec {
            Spec::Payload(path, offset, data) => Some(Chunk::Payload {
                path: path.clone(),
                offset: *offset,
                data: data.clone(),
            }),
            Spec::End(path) => Some(Chunk::EndOfFile { path: path.clone() }),
            Spec::Ignorable(..) => None,
        }
    }

    /// Reads chunks until the end or an error; checks every chunk read, and returns them.
    fn read_all(bytes: &[u8], step: usize) -> Result<(Vec<Chunk>, bool), TestCaseError> {
        let mut reader = XbReader::new(Trickle { bytes, step });
        let mut chunks = Vec::new();
        loop {
            match reader.next_chunk() {
                Ok(Some(chunk)) => {
                    let (path, again) = match &chunk {
                        Chunk::Payload { path, offset, data } => {
                            prop_assert!(data.len() as u64 <= MAX_CHUNK);
                            (path, encode_payload(path, *offset, data))
                        }
                        Chunk::EndOfFile { path } => (path, encode_end(path)),
                    };
                    prop_assert!(check_relative_path(path).is_ok());
                    let reread = XbReader::new(&again[..]).next_chunk().ok().flatten();
                    prop_assert_eq!(reread.as_ref(), Some(&chunk));
                    chunks.push(chunk);
                }
                Ok(None) => return Ok((chunks, true)),
                Err(_) => return Ok((chunks, false)),
            }
        }
    }

    proptest! {
        #![proptest_config(fuzzing::config(FUZZ_CASES))]

        /// Arbitrary bytes, most behind a chunk magic: never a panic.
        #[test]
        fn fuzz_xbstream_arbitrary_bytes(
            tail in proptest::collection::vec(any::<u8>(), 0..200),
            magic in any::<bool>(),
            step in prop_oneof![Just(usize::MAX), 1usize..16],
        ) {
            let mut bytes = Vec::new();
            if magic {
                bytes.extend_from_slice(MAGIC);
            }
            bytes.extend_from_slice(&tail);
            let (_, clean_end) = read_all(&bytes, step)?;
            prop_assert!(!clean_end || bytes.is_empty() || magic);
        }

        /// Real streams with flipped and overwritten bytes, huge lengths, cuts and
        /// insertions: never a panic; undamaged, they read back as written, and cut short
        /// they are an error, never a clean end.
        #[test]
        fn fuzz_xbstream_mutated(
            specs in proptest::collection::vec(spec(), 0..5),
            damages in proptest::collection::vec(damage(), 0..3),
            cut in proptest::option::of(any::<proptest::sample::Index>()),
            step in prop_oneof![Just(usize::MAX), 1usize..16],
        ) {
            let mut bytes = Vec::new();
            for spec in &specs {
                encode(spec, &mut bytes);
            }
            let valid = specs.iter().all(|spec| match spec {
                Spec::Payload(path, ..) | Spec::End(path) => check_relative_path(path).is_ok(),
                Spec::Ignorable(..) => true,
            });
            let whole = bytes.clone();
            fuzzing::apply(&mut bytes, &damages);
            if let Some(cut) = cut {
                bytes.truncate(cut.index(bytes.len() + 1));
            }
            let (chunks, clean_end) = read_all(&bytes, step)?;
            if damages.is_empty() && cut.is_none() && valid {
                prop_assert!(clean_end);
                let want: Vec<Chunk> = specs.iter().filter_map(expected).collect();
                prop_assert_eq!(chunks, want);
            }
            if valid && bytes.len() < whole.len() && whole.starts_with(&bytes) {
                // Cut inside or between chunks: only a cut between chunks ends cleanly.
                let boundaries: Vec<usize> = specs
                    .iter()
                    .scan(0, |at, spec| {
                        let mut one = Vec::new();
                        encode(spec, &mut one);
                        *at += one.len();
                        Some(*at)
                    })
                    .collect();
                let between = bytes.is_empty() || boundaries.contains(&bytes.len());
                prop_assert_eq!(clean_end, between);
            }
        }
    }

    /// A chunk claiming 256 MiB, or an ignorable one claiming any length, with a few bytes
    /// behind it is a stream cut inside a chunk.
    #[test]
    fn claims_beyond_the_stream_are_errors() {
        let mut huge = encode_payload("db/t.ibd", 0, b"abcdef");
        let len_at = 8 + 1 + 1 + 4 + "db/t.ibd".len();
        huge[len_at..len_at + 8].copy_from_slice(&MAX_CHUNK.to_le_bytes());
        let error = XbReader::new(&huge[..]).next_chunk().expect_err("cut");
        assert!(error.to_string().contains("ends inside a chunk"), "{error}");

        let mut ignorable = encode_payload("x", 0, b"abcdef");
        ignorable[8] = FLAG_IGNORABLE;
        ignorable[9] = b'Z';
        ignorable.truncate(ignorable.len() - 2);
        let error = XbReader::new(&ignorable[..]).next_chunk().expect_err("cut");
        assert!(error.to_string().contains("ends inside a chunk"), "{error}");
    }
}
