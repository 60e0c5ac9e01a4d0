//! The provider's TLS files (`socket.ssl_*`) as a checked [`tls::TlsContext`], and the rule
//! that a thread the provider started may not die in silence.

use std::sync::{Arc, Once};

use options::ProviderOptions;
use tls::TlsContext;

/// The TLS context `socket.ssl` asks for, `None` when it is off. An error names the option
/// and file at fault; the server must not start with it.
pub(crate) fn tls_context(options: &ProviderOptions) -> Result<Option<Arc<TlsContext>>, String> {
    let Some(files) = options.tls_files().map_err(|error| error.to_string())? else {
        return Ok(None);
    };
    TlsContext::load(files)
        .map(|context| Some(Arc::new(context)))
        .map_err(|error| error.to_string())
}

/// Threads the provider starts are named with this prefix.
const PROVIDER_THREAD_PREFIX: &str = "trireme-";

/// Makes a panic in any thread the provider started end the server at once, after a log
/// line that names the thread: a dead group loop or IST receiver would otherwise leave
/// commits waiting forever. Panics in the server's own threads are caught at the entry
/// points instead (see the crate documentation).
pub(crate) fn abort_on_provider_thread_panic() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            previous(info);
            let thread = std::thread::current();
            let name = thread.name().unwrap_or("");
            if name.starts_with(PROVIDER_THREAD_PREFIX) {
                tracing::error!(
                    thread = name,
                    %info,
                    "a Trireme thread panicked: aborting the server, as Galera does, rather \
                     than leave commits waiting on a dead thread"
                );
                std::process::abort();
            }
        }));
    });
}
