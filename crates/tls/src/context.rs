//! A node's TLS setup, checked at load and swappable at runtime.

use std::net::TcpStream;
use std::sync::{Arc, RwLock};

use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::sign::CertifiedKey;
use rustls::{ClientConfig, ServerConfig, SupportedProtocolVersion};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, UnixTime};

use crate::cipher;
use crate::error::{HandshakeError, TlsError};
use crate::files::{read_ca, read_certificates, read_private_key, subject_of, TlsFiles};
use crate::stream::{self, Stream};
use crate::verify::{PeerClientVerifier, PeerServerVerifier};

/// The configurations built from one reading of the files.
struct Loaded {
    server: Arc<ServerConfig>,
    client: Arc<ClientConfig>,
    subject: String,
}

/// A node's TLS setup: both ends of every connection it makes or takes.
pub struct TlsContext {
    files: TlsFiles,
    current: RwLock<Arc<Loaded>>,
}

impl std::fmt::Debug for TlsContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsContext")
            .field("files", &self.files)
            .field("subject", &self.subject())
            .finish()
    }
}

impl TlsContext {
    /// Reads and checks the files; see the crate documentation for what is checked.
    pub fn load(files: TlsFiles) -> Result<TlsContext, TlsError> {
        let loaded = build(&files)?;
        tracing::info!(
            subject = %loaded.subject,
            cert = %files.cert.display(),
            ca = %files.ca_path().display(),
            "TLS ready"
        );
        Ok(TlsContext {
            files,
            current: RwLock::new(Arc::new(loaded)),
        })
    }

    /// Re-reads the files. On error the previous setup stays in use.
    pub fn reload(&self) -> Result<(), TlsError> {
        let loaded = Arc::new(build(&self.files)?);
        tracing::info!(subject = %loaded.subject, "TLS files reloaded");
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = loaded;
        Ok(())
    }

    /// The files this context reads.
    pub fn files(&self) -> &TlsFiles {
        &self.files
    }

    /// The subject of the node's certificate.
    pub fn subject(&self) -> String {
        self.loaded().subject.clone()
    }

    fn loaded(&self) -> Arc<Loaded> {
        Arc::clone(&self.current.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Runs the client side of the handshake over a connected socket (whose timeouts bound
    /// the handshake).
    pub fn connect(&self, tcp: TcpStream, peer: &str) -> Result<Stream, HandshakeError> {
        stream::connect(self.loaded().client.clone(), tcp, peer)
    }

    /// The server side's configuration now (after the latest reload), for servers that run
    /// their own handshake, such as the metrics endpoint: it asks for a client certificate
    /// signed by the node's CA, as a node's peers do.
    pub fn server_config(&self) -> Arc<ServerConfig> {
        Arc::clone(&self.loaded().server)
    }

    /// The client side's configuration now, for clients that run their own handshake, such
    /// as `trireme status` reading a metrics endpoint: it presents the node's certificate and
    /// checks the server's against the CA, as the node does with its peers.
    pub fn client_config(&self) -> Arc<ClientConfig> {
        Arc::clone(&self.loaded().client)
    }

    /// Runs the server side of the handshake over an accepted socket (whose timeouts bound
    /// the handshake). A peer that speaks plaintext is named as such.
    pub fn accept(&self, tcp: TcpStream, peer: &str) -> Result<Stream, HandshakeError> {
        stream::accept(self.loaded().server.clone(), tcp, peer)
    }
}

fn build(files: &TlsFiles) -> Result<Loaded, TlsError> {
    let chain = read_certificates(files.labels.cert, &files.cert)?;
    let roots = Arc::new(read_ca(files)?);
    let key = read_private_key(files)?;
    let provider = Arc::new(crypto_provider(files)?);
    let subject = subject_of(&chain[0]);
    check_key_matches(files, &provider, &chain, &key, &subject)?;
    let config_error = |error: rustls::Error| TlsError::Config(error.to_string());
    let client_verifier =
        WebPkiClientVerifier::builder_with_provider(Arc::clone(&roots), Arc::clone(&provider))
            .build()
            .map_err(|error| TlsError::Config(error.to_string()))?;
    check_own_chain(files, client_verifier.as_ref(), &chain, &subject)?;
    let server_verifier = WebPkiServerVerifier::builder_with_provider(roots, Arc::clone(&provider))
        .build()
        .map_err(|error| TlsError::Config(error.to_string()))?;
    let versions = protocol_versions(&provider);
    let ca = files.ca_path().to_owned();
    let server = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&versions)
        .map_err(config_error)?
        .with_client_cert_verifier(Arc::new(PeerClientVerifier {
            inner: client_verifier,
            ca: ca.clone(),
        }))
        .with_single_cert(chain.clone(), key.clone_key())
        .map_err(config_error)?;
    let client = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .map_err(config_error)?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(PeerServerVerifier {
            inner: server_verifier,
            ca,
        }))
        .with_client_auth_cert(chain, key)
        .map_err(config_error)?;
    Ok(Loaded {
        server: Arc::new(server),
        client: Arc::new(client),
        subject,
    })
}

/// The ring provider, restricted to `socket.ssl_cipher`'s suites when it names some.
fn crypto_provider(files: &TlsFiles) -> Result<CryptoProvider, TlsError> {
    let mut provider = rustls::crypto::ring::default_provider();
    if let Some(list) = files
        .cipher
        .as_deref()
        .filter(|list| !list.trim().is_empty())
    {
        let choice = cipher::choose(list)?;
        if !choice.ignored.is_empty() {
            tracing::warn!(
                ignored = %choice.ignored.join(":"),
                "socket.ssl_cipher: entries that name no suite offered here are ignored"
            );
        }
        if let Some(suites) = choice.suites {
            provider.cipher_suites = suites;
        }
    }
    Ok(provider)
}

/// The protocol versions some chosen suite can run on.
fn protocol_versions(provider: &CryptoProvider) -> Vec<&'static SupportedProtocolVersion> {
    [&rustls::version::TLS13, &rustls::version::TLS12]
        .into_iter()
        .filter(|version| {
            provider
                .cipher_suites
                .iter()
                .any(|suite| suite.version() == *version)
        })
        .collect()
}

fn check_key_matches(
    files: &TlsFiles,
    provider: &CryptoProvider,
    chain: &[CertificateDer<'static>],
    key: &PrivateKeyDer<'static>,
    subject: &str,
) -> Result<(), TlsError> {
    let signing_key = provider
        .key_provider
        .load_private_key(key.clone_key())
        .map_err(|error| TlsError::Content {
            option: files.labels.key,
            path: files.key.clone(),
            problem: format!("unusable private key: {error}"),
        })?;
    let mismatch = || TlsError::KeyMismatch {
        key: files.key.clone(),
        detail: format!(
            "{} is not the key of certificate {subject:?} in {} {:?}",
            files.labels.key, files.labels.cert, files.cert
        ),
    };
    match CertifiedKey::new(chain.to_vec(), signing_key).keys_match() {
        Ok(()) => Ok(()),
        Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch)) => {
            Err(mismatch())
        }
        // The key type gives no public key to compare: the handshake will tell.
        Err(_) => Ok(()),
    }
}

/// The node's own certificate must pass the check its peers will make.
fn check_own_chain(
    files: &TlsFiles,
    verifier: &dyn rustls::server::danger::ClientCertVerifier,
    chain: &[CertificateDer<'static>],
    subject: &str,
) -> Result<(), TlsError> {
    verifier
        .verify_client_cert(&chain[0], &chain[1..], UnixTime::now())
        .map(|_| ())
        .map_err(|error| {
            let ca_option = if files.ca.is_some() {
                files.labels.ca
            } else {
                files.labels.cert
            };
            TlsError::OwnCertificate {
                cert: files.cert.clone(),
                detail: format!(
                    "{} certificate {subject:?} is not valid for the CA in {ca_option} {:?}: \
                     {error}",
                    files.labels.cert,
                    files.ca_path()
                ),
            }
        })
}
