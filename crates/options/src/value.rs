//! The value forms provider options use: booleans, sizes with suffixes, ISO 8601 durations,
//! addresses, and the few enumerations. Each form has a parser that returns `None` for text
//! it does not accept (the caller names the option and the accepted form) and a formatter
//! whose output the parser reads back to the same value.

use std::fmt;
use std::net::Ipv6Addr;
use std::time::Duration;

pub use group::config::parse_duration;

/// Parses a boolean the way Galera does: `yes/no`, `true/false`, `on/off`, `1/0`, in any
/// letter case.
pub fn parse_bool(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "yes" | "true" | "on" | "1" => Some(true),
        "no" | "false" | "off" | "0" => Some(false),
        _ => None,
    }
}

/// Largest size any option accepts (Galera keeps sizes in signed 64-bit integers).
pub const SIZE_MAX: u64 = i64::MAX as u64;

/// Parses a byte count: a decimal number, optionally followed by one of Galera's binary
/// suffixes `K`, `M`, `G`, `T` (powers of 1024, any letter case), for example `128M`.
pub fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let (digits, shift) = match text.char_indices().last()? {
        (at, suffix) if suffix.is_ascii_alphabetic() => {
            let shift = match suffix.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                _ => return None,
            };
            (&text[..at], shift)
        }
        _ => (text, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let number: u64 = digits.parse().ok()?;
    let bytes = number.checked_mul(1u64 << shift)?;
    (bytes <= SIZE_MAX).then_some(bytes)
}

/// Formats a byte count with the largest suffix that divides it exactly (`128M`, `2G`,
/// `1000`), as Galera's listing shows sizes.
pub fn format_size(bytes: u64) -> String {
    if bytes == 0 {
        return "0".to_owned();
    }
    for (shift, suffix) in [(40, 'T'), (30, 'G'), (20, 'M'), (10, 'K')] {
        if bytes.trailing_zeros() >= shift {
            return format!("{}{suffix}", bytes >> shift);
        }
    }
    bytes.to_string()
}

/// Formats a duration in the ISO 8601 form Galera prints: `PT5S`, `PT0.5S`, `PT1M`, `P1D`,
/// `PT1M30S`. Zero is `PT0S`.
pub fn format_duration(duration: Duration) -> String {
    let seconds_total = duration.as_secs();
    let nanos = duration.subsec_nanos();
    let days = seconds_total / 86_400;
    let hours = seconds_total % 86_400 / 3_600;
    let minutes = seconds_total % 3_600 / 60;
    let seconds = seconds_total % 60;
    let mut text = String::from("P");
    if days > 0 {
        text.push_str(&format!("{days}D"));
    }
    let time_zero = hours == 0 && minutes == 0 && seconds == 0 && nanos == 0;
    if time_zero && days > 0 {
        return text;
    }
    text.push('T');
    if hours > 0 {
        text.push_str(&format!("{hours}H"));
    }
    if minutes > 0 {
        text.push_str(&format!("{minutes}M"));
    }
    if seconds > 0 || nanos > 0 || (hours == 0 && minutes == 0) {
        text.push_str(&seconds.to_string());
        if nanos > 0 {
            let fraction = format!("{nanos:09}");
            text.push('.');
            text.push_str(fraction.trim_end_matches('0'));
        }
        text.push('S');
    }
    text
}

/// Formats a boolean as `yes`/`no` (the style of `cert.*`, `gcache.*`, `gcs.*` in Galera's
/// listing).
pub fn yes_no(value: bool) -> &'static str {
    if value {
        "yes"
    } else {
        "no"
    }
}

/// Formats a boolean as `true`/`false` (the style of `pc.*` in Galera's listing).
pub fn true_false(value: bool) -> &'static str {
    if value {
        "true"
    } else {
        "false"
    }
}

/// Transport of a group or IST address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    /// `tcp://`: plain TCP.
    Tcp,
    /// `ssl://`: TLS over TCP.
    Ssl,
}

impl Scheme {
    /// The scheme as written before `://`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Tcp => "tcp",
            Scheme::Ssl => "ssl",
        }
    }
}

/// A complete address: optional scheme, host and port, as in `tcp://0.0.0.0:4567` or
/// `127.0.0.1:4568`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// `None` when the text had no `scheme://` (the listing then shows none either).
    pub scheme: Option<Scheme>,
    /// Host name or IP address; an IPv6 address without its brackets.
    pub host: String,
    /// TCP port.
    pub port: u16,
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(scheme) = self.scheme {
            write!(f, "{}://", scheme.as_str())?;
        }
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// An address as written in an option, where the scheme and the port may be missing and are
/// filled in from other options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartialEndpoint {
    /// Scheme, if written.
    pub scheme: Option<Scheme>,
    /// Host name or IP address; an IPv6 address without its brackets.
    pub host: String,
    /// Port, if written.
    pub port: Option<u16>,
}

impl PartialEndpoint {
    /// The complete address, with `port` where none was written.
    pub fn with_default_port(&self, port: u16) -> Endpoint {
        Endpoint {
            scheme: self.scheme,
            host: self.host.clone(),
            port: self.port.unwrap_or(port),
        }
    }
}

/// Parses `[scheme://]host[:port]`, where scheme is `tcp` or `ssl`, host is a name, an IPv4
/// address or an IPv6 address (in brackets when a port follows), and port is 1..=65535.
pub fn parse_endpoint(text: &str) -> Option<PartialEndpoint> {
    let text = text.trim();
    let (scheme, rest) = match text.split_once("://") {
        Some((scheme, rest)) => {
            let scheme = match scheme.to_ascii_lowercase().as_str() {
                "tcp" => Scheme::Tcp,
                "ssl" => Scheme::Ssl,
                _ => return None,
            };
            (Some(scheme), rest)
        }
        None => (None, text),
    };
    let (host, port) = if let Some(bracketed) = rest.strip_prefix('[') {
        let (host, after) = bracketed.split_once(']')?;
        host.parse::<Ipv6Addr>().ok()?;
        let port = match after {
            "" => None,
            _ => Some(parse_port(after.strip_prefix(':')?)?),
        };
        (host, port)
    } else if rest.parse::<Ipv6Addr>().is_ok() {
        (rest, None)
    } else {
        match rest.split_once(':') {
            Some((host, port)) => (host, Some(parse_port(port)?)),
            None => (rest, None),
        }
    };
    let host_ok = host.contains(':')
        || (!host.is_empty()
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b'_'));
    host_ok.then(|| PartialEndpoint {
        scheme,
        host: host.to_owned(),
        port,
    })
}

fn parse_port(text: &str) -> Option<u16> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse::<u16>().ok().filter(|port| *port != 0)
}

/// Whether `host` is a wildcard address (`0.0.0.0`, `::`), which peers cannot connect to.
pub fn is_any_address(host: &str) -> bool {
    host == "0.0.0.0" || host.parse::<Ipv6Addr>().is_ok_and(|a| a.is_unspecified())
}

pub use base::FreezePurge;

/// `repl.commit_order`: how far commits may run out of the total order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CommitOrder {
    /// `0` (BYPASS): no commit ordering at all.
    Bypass,
    /// `1` (OOOC): out-of-order commits allowed.
    OutOfOrder,
    /// `2` (LOCAL_OOOC): only local transactions may commit out of order.
    LocalOutOfOrder,
    /// `3` (NO_OOOC): strict commit order (Galera's default).
    #[default]
    Ordered,
}

impl CommitOrder {
    /// Parses `0`..`3` or the names `BYPASS`, `OOOC`, `LOCAL_OOOC`, `NO_OOOC` (any case).
    pub fn parse(text: &str) -> Option<CommitOrder> {
        match text.trim().to_ascii_uppercase().as_str() {
            "0" | "BYPASS" => Some(CommitOrder::Bypass),
            "1" | "OOOC" => Some(CommitOrder::OutOfOrder),
            "2" | "LOCAL_OOOC" => Some(CommitOrder::LocalOutOfOrder),
            "3" | "NO_OOOC" => Some(CommitOrder::Ordered),
            _ => None,
        }
    }

    /// The number Galera's listing shows.
    pub fn number(self) -> u8 {
        match self {
            CommitOrder::Bypass => 0,
            CommitOrder::OutOfOrder => 1,
            CommitOrder::LocalOutOfOrder => 2,
            CommitOrder::Ordered => 3,
        }
    }
}

/// `gmcast.isolate`: cut this node off the group (a testing aid MTR uses heavily).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Isolation {
    /// `0`: normal operation.
    #[default]
    Off,
    /// `1`: drop every connection to other members and refuse new ones.
    On,
    /// `2`: like `1`, and the node then leaves the group for good ("force quit").
    ForceQuit,
}

impl Isolation {
    /// Parses `0`, `1` or `2`.
    pub fn parse(text: &str) -> Option<Isolation> {
        match text.trim() {
            "0" => Some(Isolation::Off),
            "1" => Some(Isolation::On),
            "2" => Some(Isolation::ForceQuit),
            _ => None,
        }
    }

    /// The number Galera takes.
    pub fn number(self) -> u8 {
        match self {
            Isolation::Off => 0,
            Isolation::On => 1,
            Isolation::ForceQuit => 2,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn booleans() {
        for yes in ["yes", "YES", "true", "True", "on", "ON", "1", " yes "] {
            assert_eq!(parse_bool(yes), Some(true), "{yes:?}");
        }
        for no in ["no", "No", "false", "FALSE", "off", "Off", "0"] {
            assert_eq!(parse_bool(no), Some(false), "{no:?}");
        }
        for bad in ["", "2", "yess", "y e s", "-1", "enabled"] {
            assert_eq!(parse_bool(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn sizes_with_suffixes() {
        let cases = [
            ("0", 0),
            ("1000", 1000),
            ("1k", 1 << 10),
            ("1K", 1 << 10),
            ("128M", 128 << 20),
            ("128m", 128 << 20),
            ("2G", 2 << 30),
            ("2g", 2 << 30),
            ("1T", 1 << 40),
            (" 10M ", 10 << 20),
            ("9223372036854775807", SIZE_MAX),
            ("8388607T", 8_388_607 << 40),
        ];
        for (text, bytes) in cases {
            assert_eq!(parse_size(text), Some(bytes), "{text:?}");
        }
        for bad in [
            "",
            "M",
            "-1",
            "1.5G",
            "1P",
            "1MB",
            "1 M",
            "0x10",
            "8388608T",
            "99999999999999999999",
        ] {
            assert_eq!(parse_size(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn sizes_format_with_the_largest_exact_suffix() {
        let cases = [
            (0, "0"),
            (1000, "1000"),
            (1024, "1K"),
            (128 << 20, "128M"),
            (2 << 30, "2G"),
            (3 << 40, "3T"),
            ((1 << 30) + 1, "1073741825"),
            (1536 << 20, "1536M"),
        ];
        for (bytes, text) in cases {
            assert_eq!(format_size(bytes), text);
            assert_eq!(parse_size(text), Some(bytes));
        }
    }

    #[test]
    fn durations_format_like_galera_and_read_back() {
        let cases = [
            (Duration::ZERO, "PT0S"),
            (Duration::from_secs(5), "PT5S"),
            (Duration::from_millis(500), "PT0.5S"),
            (Duration::from_millis(7500), "PT7.5S"),
            (Duration::from_secs(60), "PT1M"),
            (Duration::from_secs(90), "PT1M30S"),
            (Duration::from_secs(3600), "PT1H"),
            (Duration::from_secs(86_400), "P1D"),
            (Duration::from_secs(90_000), "P1DT1H"),
            (Duration::from_millis(1), "PT0.001S"),
        ];
        for (duration, text) in cases {
            assert_eq!(format_duration(duration), text);
            assert_eq!(parse_duration(text), Some(duration), "{text}");
        }
    }

    #[test]
    fn endpoints() {
        let full = parse_endpoint("tcp://0.0.0.0:4567").unwrap();
        assert_eq!(
            full,
            PartialEndpoint {
                scheme: Some(Scheme::Tcp),
                host: "0.0.0.0".into(),
                port: Some(4567),
            }
        );
        let ssl = parse_endpoint("SSL://node-1.example:4444").unwrap();
        assert_eq!(ssl.scheme, Some(Scheme::Ssl));
        assert_eq!(ssl.host, "node-1.example");
        let bare = parse_endpoint("127.0.0.1").unwrap();
        assert_eq!((bare.scheme, bare.port), (None, None));
        assert_eq!(bare.with_default_port(4568).to_string(), "127.0.0.1:4568");
        let v6 = parse_endpoint("tcp://[::1]:4567").unwrap();
        assert_eq!(v6.host, "::1");
        assert_eq!(v6.with_default_port(1).to_string(), "tcp://[::1]:4567");
        assert_eq!(parse_endpoint("::1").unwrap().port, None);
        for bad in [
            "",
            "udp://1.2.3.4:5",
            "tcp://",
            "1.2.3.4:0",
            "1.2.3.4:65536",
            "1.2.3.4:",
            "1.2.3.4:x",
            "host name:1",
            "[::1",
            "[nope]:1",
            "tcp://1.2.3.4:5/path",
        ] {
            assert_eq!(parse_endpoint(bad), None, "{bad:?}");
        }
        assert!(is_any_address("0.0.0.0") && is_any_address("::"));
        assert!(!is_any_address("127.0.0.1"));
    }

    #[test]
    fn commit_order_and_isolation() {
        assert_eq!(CommitOrder::parse("3"), Some(CommitOrder::Ordered));
        assert_eq!(
            CommitOrder::parse("local_oooc"),
            Some(CommitOrder::LocalOutOfOrder)
        );
        assert_eq!(CommitOrder::parse("4"), None);
        assert_eq!(CommitOrder::Bypass.number(), 0);
        assert_eq!(Isolation::parse("2"), Some(Isolation::ForceQuit));
        assert_eq!(Isolation::parse("3"), None);
        assert_eq!(Isolation::On.number(), 1);
    }
}
