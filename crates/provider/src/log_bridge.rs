//! Sends the core crates' `tracing` events (group membership, gcache recovery, ...) to the
//! server's error log through the logger MariaDB passed at `init`, so that an operator sees
//! them where every other wsrep line is. Debug and trace events are dropped, and one call
//! site logs at most once per [`REPEAT_INTERVAL`] (a peer that is down would otherwise fill
//! the log with the same line many times a second); the next line says how many were held
//! back.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

use tracing::callsite::Identifier;

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use wsrep_sys::*;

use crate::{c_string, lock};

/// The logger of the most recent `init` (one process loads one provider instance at a time).
static SERVER_LOGGER: Mutex<wsrep_log_cb_t> = Mutex::new(None);
static INSTALL: Once = Once::new();
/// Per call site: when it last logged, and how many lines were held back since.
static LAST_LOGGED: Mutex<Option<HashMap<Identifier, (Instant, u64)>>> = Mutex::new(None);
/// Shortest time between two lines from one call site.
const REPEAT_INTERVAL: Duration = Duration::from_secs(5);

/// Whether a line from `callsite` may go out now, and how many were held back before it.
fn admit(callsite: Identifier) -> Option<u64> {
    let mut guard = lock(&LAST_LOGGED);
    let seen = guard.get_or_insert_with(HashMap::new);
    let now = Instant::now();
    match seen.get_mut(&callsite) {
        Some((last, held_back)) if now.duration_since(*last) < REPEAT_INTERVAL => {
            *held_back += 1;
            None
        }
        Some((last, held_back)) => {
            *last = now;
            Some(std::mem::take(held_back))
        }
        None => {
            seen.insert(callsite, (now, 0));
            Some(0)
        }
    }
}

/// Routes tracing events to `logger` from now on (installs the bridge on first use).
pub(crate) fn route_to(logger: wsrep_log_cb_t) {
    *lock(&SERVER_LOGGER) = logger;
    INSTALL.call_once(|| {
        let subscriber = tracing_subscriber::registry().with(ServerLogLayer);
        // Another global subscriber (a host program's) wins; the bridge is then unused.
        let _ = tracing::subscriber::set_global_default(subscriber);
    });
}

struct ServerLogLayer;

/// Collects an event's message and its other fields as `name=value`.
#[derive(Default)]
struct Line {
    message: String,
    fields: String,
}

impl Visit for Line {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let _ = write!(self.fields, " {}={value:?}", field.name());
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            let _ = write!(self.fields, " {}={value}", field.name());
        }
    }
}

/// The `tracing` target of messages worded as Galera's (see `ServerLogLayer::on_event`).
const GALERA_WORDED: &str = "wsrep";

impl<S: Subscriber> Layer<S> for ServerLogLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let level = match *event.metadata().level() {
            Level::ERROR => WSREP_LOG_ERROR,
            Level::WARN => WSREP_LOG_WARN,
            Level::INFO => WSREP_LOG_INFO,
            _ => return,
        };
        let Some(held_back) = admit(event.metadata().callsite()) else {
            return;
        };
        let mut line = Line::default();
        event.record(&mut line);
        let suffix = if held_back > 0 {
            format!(" ({held_back} more like this in the last seconds not shown)")
        } else {
            String::new()
        };
        // Messages worded as Galera words them (target `wsrep`) go out without the module,
        // so that what operators and MariaDB's tests match on reads the same.
        let target = event.metadata().target();
        let prefix = if target == GALERA_WORDED {
            String::new()
        } else {
            format!("{target}: ")
        };
        let text = c_string(&format!("{prefix}{}{}{suffix}", line.message, line.fields));
        let logger = *lock(&SERVER_LOGGER);
        if let Some(logger) = logger {
            // SAFETY: the server's logger takes a level and a NUL-terminated string, and
            // stays callable while the provider is loaded.
            unsafe { logger(level, text.as_ptr()) };
        }
    }
}
