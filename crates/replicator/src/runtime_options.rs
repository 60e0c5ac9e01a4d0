//! Option changes to a running node (`SET GLOBAL wsrep_provider_options`, TLS reload).

use std::sync::atomic::Ordering;
use std::time::Duration;

use base::FreezePurge;
use group::GroupConfig;

use crate::app::LogLevel;
use crate::error::ReplicatorError;
use crate::shared::lock;
use crate::Replicator;

/// How long a `pc.weight` change waits to be in force: ordering it and one or two
/// membership changes take a few round trips, well under this on a live group.
const WEIGHT_IN_FORCE_WAIT: Duration = Duration::from_secs(10);

/// How often that wait reads the member's status (refreshed on every tick of the group).
const WEIGHT_POLL: Duration = Duration::from_millis(10);

const _: () = assert!(WEIGHT_POLL.as_millis() * 10 < WEIGHT_IN_FORCE_WAIT.as_millis());

impl Replicator {
    /// Re-reads the TLS files (`socket.ssl_reload`): connections made from now on use
    /// them. An error leaves the current files in use.
    pub fn reload_tls(&self) -> Result<(), ReplicatorError> {
        let Some(context) = &self.shared.settings.tls else {
            return Err(ReplicatorError::Tls(
                "TLS is off (socket.ssl_key and socket.ssl_cert are not set)".to_owned(),
            ));
        };
        context
            .reload()
            .map_err(|error| ReplicatorError::Tls(error.to_string()))?;
        self.shared.app.log(
            LogLevel::Info,
            &format!("TLS files reloaded: now {}", context.subject()),
        );
        Ok(())
    }

    /// `gcache.freeze_purge_at_seqno`: `-1`, a seqno or `now`.
    pub fn set_freeze_purge(&self, freeze: FreezePurge) -> Result<(), ReplicatorError> {
        lock(&self.shared.cache)
            .set_freeze_purge(freeze)
            .map_err(ReplicatorError::Options)
    }

    /// The effective `gcache.freeze_purge_at_seqno` (`now` resolved to a seqno).
    pub fn freeze_purge(&self) -> FreezePurge {
        lock(&self.shared.cache).freeze_purge()
    }

    /// Sets `repl.max_ws_size`: write-sets larger than this are refused
    /// ([`engine::CertifyOutcome::SizeExceeded`]).
    pub fn set_max_write_set_bytes(&self, limit: u64) {
        self.shared
            .max_write_set_bytes
            .store(limit, Ordering::Relaxed);
    }

    /// Applies `SET GLOBAL wsrep_provider_options` changes to the running node: the group's
    /// timeouts and flow control, and the causal read timeout.
    pub fn reconfigure(
        &self,
        group: GroupConfig,
        causal_read_timeout: Duration,
    ) -> Result<(), ReplicatorError> {
        group
            .validate()
            .map_err(|error| ReplicatorError::Options(error.to_string()))?;
        *lock(&self.shared.causal_read_timeout) = causal_read_timeout;
        if let Some(runner) = lock(&self.shared.inner).runner.as_ref() {
            let _ = runner.reconfigure(group);
        }
        Ok(())
    }

    /// After a `pc.weight` change: returns once `weight` is this member's weight in force (the
    /// group ordered it and moved its quorum), as Galera returns from the change once it is
    /// installed; outside a primary component at once (the weight is ordered when this member
    /// is in one again).
    pub fn await_weight_in_force(&self, weight: u8) {
        let Some(runner) = lock(&self.shared.inner).runner.clone() else {
            return;
        };
        let in_force = runner.await_status(WEIGHT_IN_FORCE_WAIT, WEIGHT_POLL, |status| {
            !status.primary || status.weight_in_force == Some(weight)
        });
        if in_force {
            return;
        }
        self.shared.app.log(
            LogLevel::Warning,
            &format!(
                "pc.weight={weight} not yet in force after {} s: the group has not ordered it \
                 or not yet moved its quorum to match; it takes effect when it does",
                WEIGHT_IN_FORCE_WAIT.as_secs()
            ),
        );
    }

    /// `pc.bootstrap=YES` at runtime: a member outside the primary component founds one of
    /// its own (the group logs what it did, or why it did nothing).
    pub fn force_bootstrap(&self) {
        let asked = match lock(&self.shared.inner).runner.as_ref() {
            Some(runner) => runner.force_bootstrap().is_ok(),
            None => false,
        };
        if !asked {
            self.shared.app.log(
                LogLevel::Warning,
                "pc.bootstrap request not acted on: this node is not connected to a group",
            );
        }
    }

    /// Cuts this node off from the group, or restores its links (`gmcast.isolate`, which
    /// MariaDB's tests and DBAs use to partition a node without touching the network).
    pub fn isolate(&self, isolated: bool) {
        self.shared.isolated.store(isolated, Ordering::Release);
        if let Some(runner) = lock(&self.shared.inner).runner.as_ref() {
            let _ = runner.isolate(isolated);
        }
    }
}
