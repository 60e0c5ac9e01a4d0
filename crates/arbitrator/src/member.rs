//! The arbitrator as a group member: it joins through the configured members, takes every
//! delivery (and keeps none: it holds no data), logs each view as a DBA reads garbd's log,
//! and leaves cleanly when asked to stop.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base::NodeState;
use group::{Contact, Delivery, View};
use options::ProviderOptions;
use replicator::NodeAddresses;
use tls::TlsContext;
use transport::{GroupRunner, Role, TransportOptions};

use crate::config::Settings;

/// How often the member loop looks at the stop flag while no delivery arrives.
const STOP_POLL: Duration = Duration::from_millis(100);

/// How often an arbitrator outside any primary component says so, with what to do.
pub const STRANDED_REPORT_EVERY: Duration = Duration::from_secs(30);

/// How long a leaving arbitrator waits for the group to confirm it left.
pub const LEAVE_WAIT: Duration = Duration::from_secs(5);

/// Why the arbitrator could not run.
#[derive(Debug, thiserror::Error)]
pub enum MemberError {
    /// The provider options do not parse.
    #[error("--options: {0}")]
    Options(#[from] options::OptionsError),
    /// `socket.ssl` without both files.
    #[error("--options: {0}")]
    IncompleteTls(#[from] options::IncompleteTls),
    /// The TLS files cannot be used.
    #[error("TLS: {0}")]
    Tls(String),
    /// An address does not resolve.
    #[error("{0}")]
    Address(String),
    /// The group layer cannot start (the listen address is taken, say).
    #[error("cannot listen at {address}: {source}")]
    Listen {
        /// The address.
        address: std::net::SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

/// Runs the arbitrator until `stop` is set (by SIGTERM or SIGINT), then leaves the group.
pub fn run(settings: &Settings, stop: &AtomicBool) -> Result<(), MemberError> {
    let (options, notes) = ProviderOptions::parse(&settings.options)?;
    for note in notes {
        tracing::info!("{note}");
    }
    let tls = match options.tls_files()? {
        None => None,
        Some(files) => Some(Arc::new(
            TlsContext::load(files).map_err(|error| MemberError::Tls(error.to_string()))?,
        )),
    };
    let addresses = NodeAddresses::from_options(&options).map_err(MemberError::Address)?;
    let reachable = addresses
        .resolve(&settings.peers)
        .map_err(|error| MemberError::Address(error.to_string()))?;
    let transport = TransportOptions {
        cluster_name: settings.group.clone(),
        tls,
        ..TransportOptions::default()
    };
    let contact = Contact::new(&settings.name, &reachable.group);
    let role = Role::Join {
        seeds: settings.peers.clone(),
        restart: None,
    };
    let mut runner = GroupRunner::start_with_options(
        options.group_config(),
        role,
        contact,
        reachable.group_bind,
        seed(),
        transport,
    )
    .map_err(|source| MemberError::Listen {
        address: reachable.group_bind,
        source,
    })?;
    tracing::info!(
        group = %settings.group,
        peers = %settings.peers.join(","),
        advertised = %reachable.group,
        "arbitrator {} started: joining the cluster", settings.name
    );
    // A member without data: in the primary component, never asking for state. The group
    // leaves such a member out of donor choice, votes and flow control.
    let _ = runner.handle().set_local_state(NodeState::Primary);
    let deliveries = runner
        .take_deliveries()
        .expect("a new runner has its deliveries");
    follow(&deliveries, stop);
    leave(&mut runner, &deliveries);
    Ok(())
}

/// Takes deliveries until `stop` is set or the member ends.
fn follow(deliveries: &Receiver<Delivery>, stop: &AtomicBool) {
    let mut ordered: u64 = 0;
    let mut last_logged = None;
    let mut stranded: Option<Stranded> = None;
    while !stop.load(Ordering::Acquire) {
        if let Some(stranded) = stranded.as_mut() {
            stranded.report_when_due();
        }
        match deliveries.recv_timeout(STOP_POLL) {
            Ok(Delivery::View(view)) => {
                // An ordered view and the local one that confirms it say the same.
                let summary = (view.view_id, view.primary, member_ids(&view));
                if last_logged.as_ref() != Some(&summary) {
                    log_view(&view, ordered);
                    last_logged = Some(summary);
                }
                if view.primary {
                    stranded = None;
                } else if stranded.is_none() {
                    stranded = Some(Stranded::since_now());
                }
            }
            Ok(Delivery::WriteSet { .. }) => ordered += 1,
            Ok(Delivery::StateGap { resume_after, .. }) => {
                // Nothing to catch up: the arbitrator keeps the order, not the data.
                tracing::info!("the order resumes after seqno {resume_after}");
            }
            Ok(_) => {}
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                tracing::error!("the group layer ended; the arbitrator stops");
                return;
            }
        }
    }
}

/// Time outside any primary component, reported every [`STRANDED_REPORT_EVERY`] with what
/// the DBA can do: the arbitrator never waits in silence.
struct Stranded {
    since: Instant,
    reported: Instant,
}

impl Stranded {
    fn since_now() -> Stranded {
        let now = Instant::now();
        Stranded {
            since: now,
            reported: now,
        }
    }

    fn report_when_due(&mut self) {
        if self.reported.elapsed() < STRANDED_REPORT_EVERY {
            return;
        }
        self.reported = Instant::now();
        tracing::warn!(
            "outside any primary component for {} s: waiting for the data nodes of the last \
             primary view. If they all crash and restart, it joins the component they restore \
             by itself; if the cluster was bootstrapped again by hand, restart this \
             arbitrator: it cannot tell the new cluster from the one it was in",
            self.since.elapsed().as_secs()
        );
    }
}

fn member_ids(view: &View) -> Vec<base::Uuid> {
    view.members.iter().map(|m| m.uuid).collect()
}

/// One line per view: whether the component is primary, and who is in it.
fn log_view(view: &View, ordered: u64) {
    let members: Vec<String> = view
        .members
        .iter()
        .map(|m| format!("{} ({}) {}", m.name, m.address, m.state))
        .collect();
    let kind = if view.primary {
        "primary"
    } else {
        "non-primary"
    };
    tracing::info!(
        "view {} ({kind}) at seqno {}: {} member(s): {}; write-sets ordered so far: {ordered}",
        view.view_id,
        view.seqno,
        members.len(),
        members.join(", ")
    );
}

/// Asks the group to remove this member and waits (at most [`LEAVE_WAIT`]) until it says so.
fn leave(runner: &mut GroupRunner, deliveries: &Receiver<Delivery>) {
    tracing::info!("arbitrator leaving the cluster");
    if runner.leave().is_ok() {
        let deadline = Instant::now() + LEAVE_WAIT;
        while Instant::now() < deadline && runner.status().primary {
            // Keep draining: a full delivery queue would stall the leave itself.
            let _ = deliveries.recv_timeout(STOP_POLL);
        }
    }
    runner.shutdown();
    tracing::info!("arbitrator left the cluster");
}

/// A seed for the member's RNG (election timeouts, UUIDs): distinct per process and start.
fn seed() -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    now ^ u64::from(std::process::id()).rotate_left(32)
}
