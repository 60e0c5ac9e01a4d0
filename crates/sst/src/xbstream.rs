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
                    let mut data = vec![0u8; len as usize];
                    self.read_exact(&mut data, at)?;
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
                    io::copy(&mut (&mut self.input).take(len), &mut io::sink())
                        .map_err(|e| SstError::io("skipping an ignorable chunk", e))?;
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
        self.input.read_exact(buf).map_err(|e| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                self.bad(at, "the stream ends inside a chunk")
            } else {
                SstError::io("reading mariadb-backup's stream", e)
            }
        })
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
