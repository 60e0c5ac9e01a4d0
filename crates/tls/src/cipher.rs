//! `socket.ssl_cipher`: an OpenSSL-style cipher list, mapped onto the suites rustls offers.

use rustls::crypto::ring::cipher_suite as suite;
use rustls::SupportedCipherSuite;

use crate::error::TlsError;

/// OpenSSL's names for the suites this TLS stack implements (TLS 1.3 names are the same
/// in both). Every other suite name (CBC, RSA key exchange, DHE) is one rustls refuses to
/// offer, on purpose.
const SUITES: [(&str, SupportedCipherSuite); 9] = [
    ("TLS_AES_256_GCM_SHA384", suite::TLS13_AES_256_GCM_SHA384),
    ("TLS_AES_128_GCM_SHA256", suite::TLS13_AES_128_GCM_SHA256),
    (
        "TLS_CHACHA20_POLY1305_SHA256",
        suite::TLS13_CHACHA20_POLY1305_SHA256,
    ),
    (
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        suite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        suite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        suite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "ECDHE-RSA-AES256-GCM-SHA384",
        suite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "ECDHE-RSA-AES128-GCM-SHA256",
        suite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "ECDHE-RSA-CHACHA20-POLY1305",
        suite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
];

/// What a cipher list comes to: the suites to offer (`None`: the defaults) and the
/// entries that were not used, for a warning.
#[derive(Debug, PartialEq)]
pub(crate) struct CipherChoice {
    pub(crate) suites: Option<Vec<SupportedCipherSuite>>,
    pub(crate) ignored: Vec<String>,
}

/// Maps a list such as `ECDHE-RSA-AES256-GCM-SHA384:TLS_AES_256_GCM_SHA384`.
///
/// OpenSSL keywords and exclusions (`HIGH`, `!aNULL`, `DEFAULT`) select among strong
/// suites in OpenSSL; rustls offers only strong suites, so a list of keywords keeps the
/// defaults. A list that names suites, none of which exist here, is an error: the DBA
/// asked for something specific that cannot be had.
pub(crate) fn choose(list: &str) -> Result<CipherChoice, TlsError> {
    let mut suites = Vec::new();
    let mut ignored = Vec::new();
    let mut named_unknown = false;
    for entry in list
        .split([':', ',', ' '])
        .filter(|entry| !entry.is_empty())
    {
        match SUITES
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(entry))
        {
            Some((_, chosen)) if !suites.contains(chosen) => suites.push(*chosen),
            Some(_) => {}
            None => {
                named_unknown |= looks_like_suite(entry);
                ignored.push(entry.to_owned());
            }
        }
    }
    if suites.is_empty() && named_unknown {
        return Err(TlsError::Cipher(format!(
            "{list:?} names no suite this TLS stack offers; suites offered: {}",
            offered()
        )));
    }
    Ok(CipherChoice {
        suites: (!suites.is_empty()).then_some(suites),
        ignored,
    })
}

/// A suite name has a key exchange or cipher part joined by `-` or `_`; keywords do not.
fn looks_like_suite(entry: &str) -> bool {
    !entry.starts_with(['!', '-', '+', '@']) && entry.contains(['-', '_'])
}

fn offered() -> String {
    SUITES.map(|(name, _)| name).join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suite_names_restrict_and_keywords_keep_defaults() {
        let choice = choose("ECDHE-RSA-AES256-GCM-SHA384:TLS_AES_128_GCM_SHA256").unwrap();
        assert_eq!(
            choice.suites,
            Some(vec![
                suite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
                suite::TLS13_AES_128_GCM_SHA256
            ])
        );
        let keywords = choose("HIGH:!aNULL:!MD5").unwrap();
        assert_eq!(keywords.suites, None);
        assert_eq!(keywords.ignored, ["HIGH", "!aNULL", "!MD5"]);
        let mixed = choose("AES128-SHA:ECDHE-RSA-AES128-GCM-SHA256").unwrap();
        assert_eq!(mixed.ignored, ["AES128-SHA"]);
    }

    #[test]
    fn only_unknown_suites_is_an_error_that_lists_the_offered_ones() {
        let error = choose("AES128-SHA256:DHE-RSA-AES256-SHA")
            .unwrap_err()
            .to_string();
        assert!(error.contains("AES128-SHA256"), "{error}");
        assert!(error.contains("ECDHE-RSA-AES128-GCM-SHA256"), "{error}");
    }
}
