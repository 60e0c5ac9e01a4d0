//! What several test files agree on.

/// The options Trireme accepts at start but that change nothing in Trireme: giving one
/// yields a `Warning::NoEffect` that says why.
pub(crate) const NO_EFFECT_AT_START: [&str; 5] = [
    "evs.inactive_timeout",
    "evs.keepalive_period",
    "gmcast.segment",
    "repl.commit_order",
    "socket.ssl_reload",
];
