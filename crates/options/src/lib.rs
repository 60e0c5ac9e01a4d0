//! Galera's `wsrep_provider_options` as Trireme's typed configuration, and the names of the
//! status variables a Galera provider reports.
//!
//! MariaDB hands the provider the option string from my.cnf at `init`, passes every
//! `SET GLOBAL wsrep_provider_options = '...'` to `options_set`, and shows whatever
//! `options_get` returns as `@@wsrep_provider_options` (see `shared/notes/wsrep-contract.md`
//! §4.2). [`ProviderOptions`] covers all three: [`ProviderOptions::parse_with`],
//! [`ProviderOptions::set_runtime`] and [`ProviderOptions::render`].
//!
//! Layout:
//! - `provider`: [`ProviderOptions`], which options Trireme implements, which may change at
//!   runtime, which have no effect in Trireme and why, and how values depend on each other;
//!   [`options_table_markdown`] renders all of it as `docs/options.md`.
//! - [`galera`]: the option names Galera knows, as data.
//! - [`value`]: value forms (booleans, sizes, durations, addresses) and their formatting.
//! - [`syntax`]: the `key = value; ...` text.
//! - [`status_vars`]: the status variable names Galera reports, as data.
//! - `tls_files`: the group's TLS files (`socket.ssl_*`) as the `tls` crate takes them.

pub mod galera;
pub mod status_vars;
pub mod syntax;
pub mod value;

mod gcache_config;
mod provider;
mod tls_files;

pub use provider::{
    implemented_options, is_implemented, options_table_markdown, runtime_options, InitContext,
    ProviderOptions, Warning, MAX_WS_SIZE_LIMIT,
};
pub use tls_files::IncompleteTls;

/// Why an option string was refused. Nothing is applied when any entry is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OptionsError {
    /// An entry with a name but no `=`.
    #[error("option {key} has no value (expected {key} = value)")]
    KeyWithoutValue {
        /// The name given.
        key: String,
    },
    /// An entry with `=` but nothing before it.
    #[error("empty option name in {entry:?}")]
    EmptyKey {
        /// The entry as written.
        entry: String,
    },
    /// An entry with two `=`.
    #[error("more than one value for option {key} in {entry:?} (write a literal '=' as '\\=')")]
    MoreThanOneValue {
        /// The name given.
        key: String,
        /// The entry as written.
        entry: String,
    },
    /// A value outside the accepted range or of the wrong form.
    #[error("invalid value {value:?} for {option}: {expected}")]
    InvalidValue {
        /// The option name.
        option: String,
        /// The value as given.
        value: String,
        /// What would have been accepted.
        expected: &'static str,
    },
    /// Names that are neither Galera options nor Trireme's.
    #[error(
        "Unknown parameter {} (neither Galera nor Trireme has such an option)",
        quoted(options)
    )]
    Unknown {
        /// The names, in the order given.
        options: Vec<String>,
    },
    /// A change at runtime to an option that only takes effect at startup.
    #[error("option {option} cannot be changed at runtime")]
    NotRuntime {
        /// The option name.
        option: String,
    },
    /// Options that contradict each other.
    #[error("inconsistent provider options: {0}")]
    Inconsistent(String),
}

/// `'a', 'b'`: option names as Galera quotes an unknown one.
fn quoted(names: &[String]) -> String {
    let quoted: Vec<String> = names.iter().map(|name| format!("'{name}'")).collect();
    quoted.join(", ")
}
