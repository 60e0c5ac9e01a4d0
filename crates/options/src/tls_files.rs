//! The group's TLS files (`socket.ssl_*`) as the `tls` crate takes them: one reading for the
//! provider, the SST method and the arbitrator.

use std::path::PathBuf;

use tls::{Labels, TlsFiles};

use crate::ProviderOptions;

/// `socket.ssl` is on without both of the node's files. Parsing refuses such a string, so
/// only options built by hand can get here; TLS must not quietly fall back to plaintext.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "socket.ssl is on, but socket.ssl_key and socket.ssl_cert are not both set: TLS needs \
     the node's key and certificate"
)]
pub struct IncompleteTls;

impl ProviderOptions {
    /// The files every group connection is secured with; `None` when `socket.ssl` is off.
    pub fn tls_files(&self) -> Result<Option<TlsFiles>, IncompleteTls> {
        if !self.socket_ssl {
            return Ok(None);
        }
        let (Some(key), Some(cert)) = (&self.socket_ssl_key, &self.socket_ssl_cert) else {
            return Err(IncompleteTls);
        };
        Ok(Some(TlsFiles {
            key: PathBuf::from(key),
            cert: PathBuf::from(cert),
            ca: self.socket_ssl_ca.as_ref().map(PathBuf::from),
            password_file: self.socket_ssl_password_file.as_ref().map(PathBuf::from),
            cipher: self.socket_ssl_cipher.clone(),
            labels: Labels::PROVIDER,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_files_follow_socket_ssl_and_refuse_half_a_pair() {
        let (plain, _) = ProviderOptions::parse("").unwrap();
        assert_eq!(plain.tls_files(), Ok(None));
        let (secured, _) =
            ProviderOptions::parse("socket.ssl_key=/k.pem; socket.ssl_cert=/c.pem").unwrap();
        let files = secured
            .tls_files()
            .unwrap()
            .expect("socket.ssl follows the files");
        assert_eq!(files.key, PathBuf::from("/k.pem"));
        assert_eq!(
            files.ca_path(),
            PathBuf::from("/c.pem"),
            "the CA defaults to the cert"
        );
        let mut half = secured.clone();
        half.socket_ssl_cert = None;
        assert_eq!(half.tls_files(), Err(IncompleteTls));
    }
}
