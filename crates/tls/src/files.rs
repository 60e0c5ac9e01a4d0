//! The files a TLS setup is made of, and their reading: PEM certificates, a private key
//! (encrypted PKCS#8 with a password file, or plain), the CA bundle.

use std::fs;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use pkcs8::der::pem::PemLabel;
use pkcs8::EncryptedPrivateKeyInfo;
use rustls::RootCertStore;
use rustls_pki_types::pem::{self, SectionKind};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::error::TlsError;

/// The option names under which the files were configured, for error messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Labels {
    /// The private key's option.
    pub key: &'static str,
    /// The certificate's option.
    pub cert: &'static str,
    /// The CA's option.
    pub ca: &'static str,
    /// The key password file's option.
    pub password_file: &'static str,
}

impl Labels {
    /// The provider's options (Galera's names).
    pub const PROVIDER: Labels = Labels {
        key: "socket.ssl_key",
        cert: "socket.ssl_cert",
        ca: "socket.ssl_ca",
        password_file: "socket.ssl_password_file",
    };
    /// The flags of a command-line tool (`trireme status`).
    pub const CLI: Labels = Labels {
        key: "--ssl-key",
        cert: "--ssl-cert",
        ca: "--ssl-ca",
        password_file: "--ssl-password-file",
    };
    /// MariaDB's `[sst]` section names.
    pub const SST: Labels = Labels {
        key: "[sst] tkey",
        cert: "[sst] tcert",
        ca: "[sst] tca",
        password_file: "socket.ssl_password_file",
    };
}

/// Where a node's TLS material lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// The private key (PEM: PKCS#8, PKCS#1 RSA, SEC1 EC, or encrypted PKCS#8).
    pub key: PathBuf,
    /// The node's certificate, optionally followed by intermediates (PEM).
    pub cert: PathBuf,
    /// The CA bundle peers must chain to. Galera's default is the certificate file itself.
    pub ca: Option<PathBuf>,
    /// A file whose first line is the password of an encrypted key.
    pub password_file: Option<PathBuf>,
    /// OpenSSL-style cipher list (`socket.ssl_cipher`); `None`: the library's defaults.
    pub cipher: Option<String>,
    /// The option names, for messages.
    pub labels: Labels,
}

impl TlsFiles {
    /// The CA file in effect (the certificate file when none is given, as in Galera).
    pub fn ca_path(&self) -> &Path {
        self.ca.as_deref().unwrap_or(&self.cert)
    }
}

/// Most bytes read from any one TLS file: a CA bundle is a few hundred KiB at most.
const FILE_MAX: u64 = 16 << 20;

fn read_file(option: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    let read_error = |source| TlsError::Read {
        option,
        path: path.to_owned(),
        source,
    };
    let size = fs::metadata(path).map_err(read_error)?.len();
    if size > FILE_MAX {
        return Err(content(
            option,
            path,
            format!("{size} bytes is not a PEM file"),
        ));
    }
    fs::read(path).map_err(read_error)
}

fn content(option: &'static str, path: &Path, problem: impl Into<String>) -> TlsError {
    TlsError::Content {
        option,
        path: path.to_owned(),
        problem: problem.into(),
    }
}

/// Every PEM section of a file, in order, with the label of each unsupported one kept.
fn sections(option: &'static str, path: &Path) -> Result<Vec<(SectionKind, Vec<u8>)>, TlsError> {
    let bytes = read_file(option, path)?;
    let mut reader = BufReader::new(bytes.as_slice());
    let mut found = Vec::new();
    loop {
        match pem::from_buf(&mut reader) {
            Ok(Some(section)) => found.push(section),
            Ok(None) => return Ok(found),
            Err(error) => return Err(content(option, path, format!("not valid PEM: {error}"))),
        }
    }
}

/// The certificates of a PEM file, in order; at least one.
pub(crate) fn read_certificates(
    option: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certificates: Vec<_> = sections(option, path)?
        .into_iter()
        .filter(|(kind, _)| *kind == SectionKind::Certificate)
        .map(|(_, der)| CertificateDer::from(der))
        .collect();
    if certificates.is_empty() {
        return Err(content(
            option,
            path,
            "holds no PEM certificate (BEGIN CERTIFICATE)",
        ));
    }
    Ok(certificates)
}

/// The CA bundle as a trust store.
pub(crate) fn read_ca(files: &TlsFiles) -> Result<RootCertStore, TlsError> {
    let option = if files.ca.is_some() {
        files.labels.ca
    } else {
        files.labels.cert
    };
    let path = files.ca_path();
    let mut roots = RootCertStore::empty();
    for certificate in read_certificates(option, path)? {
        roots.add(certificate).map_err(|error| {
            content(
                option,
                path,
                format!("a CA certificate is unusable: {error}"),
            )
        })?;
    }
    Ok(roots)
}

/// The private key, decrypted with the password file when it is encrypted.
pub(crate) fn read_private_key(files: &TlsFiles) -> Result<PrivateKeyDer<'static>, TlsError> {
    let option = files.labels.key;
    let path = &files.key;
    let text = read_file(option, path)?;
    if contains(&text, b"Proc-Type: 4,ENCRYPTED") {
        return Err(content(
            option,
            path,
            "uses OpenSSL's legacy key encryption, which is not supported; convert it with \
             `openssl pkcs8 -topk8 -in old.key -out new.key` (and keep socket.ssl_password_file)",
        ));
    }
    if contains(&text, b"-----BEGIN ENCRYPTED PRIVATE KEY-----") {
        return decrypt_key(files, &text);
    }
    let key = sections(option, path)?
        .into_iter()
        .find_map(|(kind, der)| match kind {
            SectionKind::PrivateKey => Some(PrivateKeyDer::Pkcs8(der.into())),
            SectionKind::RsaPrivateKey => Some(PrivateKeyDer::Pkcs1(der.into())),
            SectionKind::EcPrivateKey => Some(PrivateKeyDer::Sec1(der.into())),
            _ => None,
        });
    key.ok_or_else(|| content(option, path, "holds no PEM private key (BEGIN PRIVATE KEY)"))
}

fn decrypt_key(files: &TlsFiles, text: &[u8]) -> Result<PrivateKeyDer<'static>, TlsError> {
    let option = files.labels.key;
    let path = &files.key;
    let Some(password_file) = &files.password_file else {
        return Err(content(
            option,
            path,
            format!(
                "is encrypted, and {} is not set",
                files.labels.password_file
            ),
        ));
    };
    let password = read_password(files.labels.password_file, password_file)?;
    let text = std::str::from_utf8(text).map_err(|_| content(option, path, "is not text"))?;
    let (label, der) = pkcs8::der::pem::decode_vec(text.as_bytes())
        .map_err(|error| content(option, path, format!("not valid PEM: {error}")))?;
    if label != EncryptedPrivateKeyInfo::PEM_LABEL {
        return Err(content(
            option,
            path,
            format!("starts with a {label} section, not the key"),
        ));
    }
    let encrypted = EncryptedPrivateKeyInfo::try_from(der.as_slice()).map_err(|error| {
        content(
            option,
            path,
            format!("not an encrypted PKCS#8 key: {error}"),
        )
    })?;
    let decrypted = encrypted.decrypt(password.as_bytes()).map_err(|error| {
        content(
            option,
            path,
            format!("cannot be decrypted with the password in {password_file:?} ({error}): wrong password?"),
        )
    })?;
    Ok(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        decrypted.as_bytes().to_vec(),
    )))
}

/// The first line of the password file, without its line end.
fn read_password(option: &'static str, path: &Path) -> Result<String, TlsError> {
    let bytes = read_file(option, path)?;
    let text = String::from_utf8(bytes).map_err(|_| content(option, path, "is not UTF-8 text"))?;
    let password = text.lines().next().unwrap_or("").to_owned();
    if password.is_empty() {
        return Err(content(option, path, "is empty"));
    }
    Ok(password)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

/// The subject of a DER certificate, for messages (`?` when it does not parse).
pub(crate) fn subject_of(certificate: &CertificateDer<'_>) -> String {
    match x509_parser::parse_x509_certificate(certificate.as_ref()) {
        Ok((_, parsed)) => parsed.subject().to_string(),
        Err(_) => "?".to_owned(),
    }
}
