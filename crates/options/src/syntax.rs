//! The `key = value; key = value` text of `wsrep_provider_options`, as Galera's
//! `gu::Config::parse` reads it:
//! - entries are separated by `;`, and key and value by `=`;
//! - whitespace around keys and values is trimmed;
//! - empty entries are skipped, so a trailing `;` is fine; an empty value is allowed;
//! - a backslash makes the next `;`, `=` or backslash literal (`\;`, `\=`, `\\`); before any
//!   other character it is kept as it is;
//! - an entry with a key but no `=`, with an empty key, or with two `=` is an error.

use crate::OptionsError;

/// One `key = value` entry, trimmed and unescaped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The option name.
    pub key: String,
    /// The value; may be empty.
    pub value: String,
}

/// Splits an option string into its entries, in order. Repeated keys are kept; the caller
/// applies them in order, so the last one wins.
pub fn parse_entries(text: &str) -> Result<Vec<Entry>, OptionsError> {
    let mut entries = Vec::new();
    for raw in split_unescaped(text, ';') {
        let parts = split_unescaped(raw, '=');
        let key = unescape(parts[0]).trim().to_owned();
        match (key.is_empty(), parts.len()) {
            (true, 1) => {} // An empty or blank entry.
            (true, _) => {
                return Err(OptionsError::EmptyKey {
                    entry: raw.trim().to_owned(),
                })
            }
            (false, 1) => return Err(OptionsError::KeyWithoutValue { key }),
            (false, 2) => entries.push(Entry {
                key,
                value: unescape(parts[1]).trim().to_owned(),
            }),
            (false, _) => {
                return Err(OptionsError::MoreThanOneValue {
                    key,
                    entry: raw.trim().to_owned(),
                })
            }
        }
    }
    Ok(entries)
}

/// Escapes `\`, `;` and `=` so that a value reads back unchanged.
pub fn escape(value: &str) -> String {
    let mut escaped = String::with_capacity(value.len());
    for c in value.chars() {
        if matches!(c, '\\' | ';' | '=') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

/// Splits at every `separator` not escaped by a backslash. Always yields at least one part.
fn split_unescaped(text: &str, separator: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut escaped = false;
    for (at, c) in text.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == separator {
            parts.push(&text[start..at]);
            start = at + c.len_utf8();
        }
    }
    parts.push(&text[start..]);
    parts
}

fn unescape(text: &str) -> String {
    let mut unescaped = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(&next) = chars.peek() {
                if matches!(next, '\\' | ';' | '=') {
                    unescaped.push(next);
                    chars.next();
                    continue;
                }
            }
        }
        unescaped.push(c);
    }
    unescaped
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(text: &str) -> Vec<(String, String)> {
        parse_entries(text)
            .unwrap()
            .into_iter()
            .map(|entry| (entry.key, entry.value))
            .collect()
    }

    fn pair(key: &str, value: &str) -> (String, String) {
        (key.to_owned(), value.to_owned())
    }

    #[test]
    fn galera_syntax_is_read() {
        assert_eq!(pairs(""), vec![]);
        assert_eq!(pairs(" ; ;; "), vec![]);
        assert_eq!(
            pairs("repl.causal_read_timeout=PT90S;base_port=19002;gcache.size=10M"),
            vec![
                pair("repl.causal_read_timeout", "PT90S"),
                pair("base_port", "19002"),
                pair("gcache.size", "10M"),
            ]
        );
        assert_eq!(
            pairs("  gcs.fc_limit = 100 ;\n\tgcs.fc_factor=0.5; "),
            vec![pair("gcs.fc_limit", "100"), pair("gcs.fc_factor", "0.5")]
        );
        assert_eq!(
            pairs("gmcast.mcast_addr = ; gcomm.thread_prio ="),
            vec![pair("gmcast.mcast_addr", ""), pair("gcomm.thread_prio", "")]
        );
        assert_eq!(pairs("a=1;a=2"), vec![pair("a", "1"), pair("a", "2")]);
    }

    #[test]
    fn escapes_keep_separators_in_values() {
        assert_eq!(
            pairs(r"gcache.dir = /data\;x\=y\\z; b = c:\d"),
            vec![pair("gcache.dir", r"/data;x=y\z"), pair("b", r"c:\d")]
        );
        let value = r"a;b=c\d";
        let text = format!("k = {}", escape(value));
        assert_eq!(pairs(&text), vec![pair("k", value)]);
    }

    #[test]
    fn malformed_entries_are_errors() {
        assert_eq!(
            parse_entries("gcache.size=1G; evs.suspect_timeout"),
            Err(OptionsError::KeyWithoutValue {
                key: "evs.suspect_timeout".into()
            })
        );
        assert_eq!(
            parse_entries(" = 5"),
            Err(OptionsError::EmptyKey {
                entry: "= 5".into()
            })
        );
        assert_eq!(
            parse_entries("gcache.size=1G=2G"),
            Err(OptionsError::MoreThanOneValue {
                key: "gcache.size".into(),
                entry: "gcache.size=1G=2G".into()
            })
        );
        assert!(parse_entries("=").is_err());
    }
}
