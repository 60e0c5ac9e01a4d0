//! Settings of the group layer, with Galera's option names where Galera has one.
//!
//! The group layer counts time in ticks; the driver calls [`crate::GroupNode::tick`] every
//! `tick_interval_ns`. Durations given in Galera's ISO 8601 form (`PT5S`) are converted to
//! ticks here, once, so the core never does time arithmetic on wall-clock values.

use std::time::Duration;

/// The default `gcs.catch_up_period`: long enough that a node applying as fast as the
/// others pauses the cluster little, short enough that a DBA sees it SYNCED soon.
pub const CATCH_UP_PERIOD_DEFAULT: Duration = Duration::from_secs(60);

/// The shortest `gcs.catch_up_period` accepted (shorter is a full stop in all but name).
pub const CATCH_UP_PERIOD_MIN: Duration = Duration::from_secs(1);

/// The longest `gcs.catch_up_period` accepted (a day: beyond it the bound means nothing).
pub const CATCH_UP_PERIOD_MAX: Duration = Duration::from_secs(24 * 3600);

const _: () = assert!(
    CATCH_UP_PERIOD_MIN.as_nanos() <= CATCH_UP_PERIOD_DEFAULT.as_nanos()
        && CATCH_UP_PERIOD_DEFAULT.as_nanos() <= CATCH_UP_PERIOD_MAX.as_nanos()
);

/// Settings of one group member.
#[derive(Clone, Debug)]
pub struct GroupConfig {
    /// Time between two ticks, in nanoseconds.
    pub tick_interval_ns: u64,
    /// Ticks without a leader before a follower starts an election (Raft's election timeout;
    /// the actual value is drawn from `[election_ticks, 2 * election_ticks)` per term).
    pub election_ticks: usize,
    /// Ticks between two leader heartbeats.
    pub heartbeat_ticks: usize,
    /// `evs.suspect_timeout`: a member the leader has not heard from for this long is evicted
    /// from the view.
    pub suspect_timeout: Duration,
    /// `evs.inactive_timeout`: a member that has been outside any primary component for this
    /// long gives up its membership and rejoins as a new member (asking for state transfer).
    pub inactive_timeout: Duration,
    /// `gcs.fc_limit`: apply queue length above which a member asks the group to pause.
    pub fc_limit: u64,
    /// `gcs.fc_factor`: the member asks to resume once its queue is at or below
    /// `fc_limit * fc_factor`.
    pub fc_factor: f64,
    /// `gcs.fc_single_primary`: one node writes, so the limit is not scaled by the
    /// cluster size.
    pub fc_single_primary: bool,
    /// `gcs.catch_up_period` (Trireme's own): how long a JOINED member may take to work off
    /// the backlog it had when it turned JOINED (`node::catch_up`).
    pub catch_up_period: Duration,
    /// Largest ordered batch, in payload bytes; bigger batches are split into several entries.
    pub batch_bytes_max: usize,
    /// A submission not yet seen ordered after this many ticks is sent to the leader again.
    /// Duplicates are harmless: the ordered log drops them deterministically.
    pub resend_ticks: u64,
    /// Ordered log entries kept behind the applied position so that a member that lags
    /// briefly catches up from the log instead of needing a state transfer.
    pub log_retain_entries: u64,
    /// The most payload the retained entries may hold: past it, the log is cut at a later
    /// snapshot, and a member that lags further is sent a snapshot and a state transfer.
    pub log_retain_bytes: u64,
    /// A group-state snapshot is taken every this many applied log entries.
    pub snapshot_interval_entries: u64,
    /// Ticks a leaving member waits for its removal to reach the others.
    pub leave_grace_ticks: u64,
    /// Ticks between two join requests of a member that is not in a view yet.
    pub join_retry_ticks: u64,
    /// `repl.max_ws_size`: the largest write-set, in bytes, the leader orders. A forwarded
    /// write-set (or chunk of one) that would be larger is refused, which also bounds what
    /// the reassembly of a chunked write-set holds.
    pub max_ws_size: u64,
    /// `pc.ignore_sb`: a member cut off from the majority for `evs.suspect_timeout` goes on
    /// as a primary component of itself alone, accepting a split brain, as Galera does.
    pub ignore_split_brain: bool,
    /// `pc.ignore_quorum`: the same, for a member that lost its quorum however the group
    /// split. Trireme's `pc.ignore_sb` already goes on whatever the split, so the two act
    /// alike; each is logged under its own name.
    pub ignore_quorum: bool,
    /// `pc.recovery`: a data node restarted with a saved view takes part in restoring the
    /// primary component after a full crash (see `recovery`).
    pub recover_primary: bool,
    /// `pc.weight`: this member's weight in the quorum (see `crate::weights`).
    pub weight: u8,
}

/// Default of [`GroupConfig::log_retain_bytes`]. A few seconds of a heavy write load: what a
/// member that pauses briefly (a stall of its host, a long garbage pass) needs from the log.
/// Every node holds this much memory on top of the gcache, so it stays well below the
/// gcache's own default of 128 MB.
pub const LOG_RETAIN_BYTES_DEFAULT: u64 = 64 << 20;

/// Default of [`GroupConfig::batch_bytes_max`].
pub const BATCH_BYTES_MAX_DEFAULT: usize = 1 << 20;

// A quarter of the byte budget holds several full batches, so a snapshot (and so a cut
// point) comes along well before the budget is spent.
const _: () = assert!(
    LOG_RETAIN_BYTES_DEFAULT / SNAPSHOTS_PER_RETAINED_BYTES >= 4 * BATCH_BYTES_MAX_DEFAULT as u64
);

/// A snapshot is also taken once this fraction of `log_retain_bytes` has been appended
/// since the last one, so the byte budget has a cut point well before it is spent.
pub const SNAPSHOTS_PER_RETAINED_BYTES: u64 = 4;

/// Galera's default and ceiling of `repl.max_ws_size`: 2 GiB - 1.
pub const MAX_WS_SIZE_DEFAULT: u64 = (2 << 30) - 1;

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig {
            tick_interval_ns: 10_000_000,
            election_ticks: 10,
            heartbeat_ticks: 2,
            suspect_timeout: Duration::from_secs(5),
            inactive_timeout: Duration::from_secs(15),
            fc_limit: 16,
            fc_factor: 1.0,
            fc_single_primary: false,
            catch_up_period: CATCH_UP_PERIOD_DEFAULT,
            batch_bytes_max: BATCH_BYTES_MAX_DEFAULT,
            resend_ticks: 50,
            log_retain_entries: 10_000,
            log_retain_bytes: LOG_RETAIN_BYTES_DEFAULT,
            snapshot_interval_entries: 1_000,
            leave_grace_ticks: 20,
            join_retry_ticks: 20,
            max_ws_size: MAX_WS_SIZE_DEFAULT,
            ignore_split_brain: false,
            ignore_quorum: false,
            recover_primary: true,
            weight: crate::weights::DEFAULT_WEIGHT,
        }
    }
}

/// An option that lets a member without a quorum go on as a primary component of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuorumOverride {
    /// `pc.ignore_sb`.
    IgnoreSplitBrain,
    /// `pc.ignore_quorum`.
    IgnoreQuorum,
}

impl QuorumOverride {
    /// The option's name.
    pub fn option(self) -> &'static str {
        match self {
            QuorumOverride::IgnoreSplitBrain => "pc.ignore_sb",
            QuorumOverride::IgnoreQuorum => "pc.ignore_quorum",
        }
    }

    /// What it ignores, in Galera's log words.
    pub fn ignored(self) -> &'static str {
        match self {
            QuorumOverride::IgnoreSplitBrain => "possible split-brain",
            QuorumOverride::IgnoreQuorum => "lack of quorum",
        }
    }
}

impl GroupConfig {
    /// The option on, if any, that lets a member without a quorum go on alone.
    pub fn goes_on_without_quorum(&self) -> Option<QuorumOverride> {
        if self.ignore_split_brain {
            Some(QuorumOverride::IgnoreSplitBrain)
        } else if self.ignore_quorum {
            Some(QuorumOverride::IgnoreQuorum)
        } else {
            None
        }
    }
}

/// An option the group layer could not accept.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ConfigError {
    /// A value outside the accepted range or of the wrong form.
    #[error("invalid value {value:?} for {option}: {expected}")]
    InvalidValue {
        /// The option name as given.
        option: String,
        /// The value as given.
        value: String,
        /// What would have been accepted.
        expected: &'static str,
    },
    /// Two settings that contradict each other.
    #[error("inconsistent settings: {0}")]
    Inconsistent(String),
}

impl GroupConfig {
    /// Suspect timeout in ticks (at least one election timeout, so a leader change alone
    /// never evicts anybody).
    pub fn suspect_ticks(&self) -> u64 {
        self.duration_ticks(self.suspect_timeout)
            .max(2 * self.election_ticks as u64)
    }

    /// Inactive timeout in ticks.
    pub fn inactive_ticks(&self) -> u64 {
        self.duration_ticks(self.inactive_timeout)
            .max(self.suspect_ticks())
    }

    /// `duration` in ticks, rounded up.
    pub(crate) fn duration_ticks(&self, duration: Duration) -> u64 {
        let nanos = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
        nanos.div_ceil(self.tick_interval_ns.max(1))
    }

    /// The queue length above which a member asks the group to pause, in a component of
    /// `members`. As in Galera, a multi-writer cluster scales `gcs.fc_limit` by the square
    /// root of its size: more writers make a member's queue noisier.
    pub fn fc_stop_above(&self, members: usize) -> u64 {
        if self.fc_single_primary || members <= 1 {
            return self.fc_limit;
        }
        (self.fc_limit as f64 * (members as f64).sqrt()).round() as u64
    }

    /// The queue length at or below which a member that asked for a pause lets go.
    pub fn fc_resume_at(&self, members: usize) -> u64 {
        (self.fc_stop_above(members) as f64 * self.fc_factor).floor() as u64
    }

    /// Applies one `name=value` provider option. Returns `Ok(false)` for a name this layer
    /// does not own, so the caller can try the next layer.
    pub fn apply_option(&mut self, name: &str, value: &str) -> Result<bool, ConfigError> {
        let invalid = |expected| ConfigError::InvalidValue {
            option: name.to_owned(),
            value: value.to_owned(),
            expected,
        };
        match name {
            "evs.suspect_timeout" => {
                self.suspect_timeout = parse_duration(value)
                    .filter(|d| !d.is_zero())
                    .ok_or_else(|| invalid("a positive ISO 8601 duration such as PT5S"))?;
            }
            "evs.inactive_timeout" => {
                self.inactive_timeout = parse_duration(value)
                    .filter(|d| !d.is_zero())
                    .ok_or_else(|| invalid("a positive ISO 8601 duration such as PT15S"))?;
            }
            "gcs.fc_limit" => {
                self.fc_limit = value
                    .trim()
                    .parse::<u64>()
                    .ok()
                    .filter(|v| (1..=1 << 30).contains(v))
                    .ok_or_else(|| invalid("an integer from 1 to 1073741824"))?;
            }
            "gcs.catch_up_period" => {
                self.catch_up_period = parse_duration(value)
                    .filter(|d| (CATCH_UP_PERIOD_MIN..=CATCH_UP_PERIOD_MAX).contains(d))
                    .ok_or_else(|| {
                        invalid("an ISO 8601 duration from PT1S to P1D, such as PT30S")
                    })?;
            }
            "gcs.fc_factor" => {
                self.fc_factor = value
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|v| (0.0..=1.0).contains(v))
                    .ok_or_else(|| invalid("a number from 0.0 to 1.0"))?;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Checks the relationships between settings.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.heartbeat_ticks == 0 || self.heartbeat_ticks >= self.election_ticks {
            return Err(ConfigError::Inconsistent(format!(
                "heartbeat_ticks ({}) must be at least 1 and below election_ticks ({})",
                self.heartbeat_ticks, self.election_ticks
            )));
        }
        if self.inactive_timeout < self.suspect_timeout {
            return Err(ConfigError::Inconsistent(format!(
                "evs.inactive_timeout ({:?}) must not be shorter than evs.suspect_timeout ({:?})",
                self.inactive_timeout, self.suspect_timeout
            )));
        }
        if self.snapshot_interval_entries == 0 || self.tick_interval_ns == 0 {
            return Err(ConfigError::Inconsistent(
                "snapshot_interval_entries and tick_interval_ns must be positive".into(),
            ));
        }
        Ok(())
    }
}

/// Parses the ISO 8601 durations Galera uses (`PT5S`, `PT1.5S`, `PT1M30S`, `P1DT2H`), and a
/// bare number of seconds.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<f64>() {
        return (seconds >= 0.0 && seconds.is_finite()).then(|| Duration::from_secs_f64(seconds));
    }
    let rest = text.strip_prefix('P')?;
    let (date, time) = match rest.split_once('T') {
        Some((date, time)) => (date, Some(time)),
        None => (rest, None),
    };
    let mut seconds = 0.0;
    seconds += parse_units(date, &[('D', 86_400.0)])?;
    if let Some(time) = time {
        if time.is_empty() {
            return None;
        }
        seconds += parse_units(time, &[('H', 3_600.0), ('M', 60.0), ('S', 1.0)])?;
    }
    if date.is_empty() && time.is_none() {
        return None;
    }
    Some(Duration::from_secs_f64(seconds))
}

fn parse_units(mut text: &str, units: &[(char, f64)]) -> Option<f64> {
    let mut total = 0.0;
    let mut allowed = units;
    while !text.is_empty() {
        let split = text.find(|c: char| c.is_ascii_alphabetic())?;
        let number: f64 = text[..split].parse().ok().filter(|n: &f64| *n >= 0.0)?;
        let unit = text[split..].chars().next()?;
        let position = allowed.iter().position(|(u, _)| *u == unit)?;
        total += number * allowed[position].1;
        allowed = &allowed[position + 1..];
        text = &text[split + 1..];
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn galera_durations() {
        assert_eq!(parse_duration("PT5S"), Some(Duration::from_secs(5)));
        assert_eq!(parse_duration("PT1.5S"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_duration("PT1M30S"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("P1DT1H"), Some(Duration::from_secs(90_000)));
        assert_eq!(parse_duration("3"), Some(Duration::from_secs(3)));
        for bad in ["", "P", "PT", "5S", "PT5X", "PTS", "PT-1S", "PT1S1M"] {
            assert_eq!(parse_duration(bad), None, "{bad:?} accepted");
        }
    }

    #[test]
    fn options_are_applied_and_bad_values_named() {
        let mut config = GroupConfig::default();
        assert_eq!(config.apply_option("evs.suspect_timeout", "PT2S"), Ok(true));
        assert_eq!(config.suspect_timeout, Duration::from_secs(2));
        assert_eq!(config.suspect_ticks(), 200);
        assert_eq!(config.apply_option("gcs.fc_limit", "100"), Ok(true));
        assert_eq!(config.apply_option("gcs.fc_factor", "0.5"), Ok(true));
        assert_eq!(config.fc_resume_at(1), 50);
        assert_eq!(
            config.fc_stop_above(3),
            173,
            "scaled by the square root of the size"
        );
        assert_eq!(config.fc_resume_at(4), 100);
        config.fc_single_primary = true;
        assert_eq!(config.fc_stop_above(9), 100, "one writer: no scaling");
        assert_eq!(config.apply_option("gcache.size", "1G"), Ok(false));
        let error = config.apply_option("gcs.fc_factor", "2").unwrap_err();
        assert!(error.to_string().contains("gcs.fc_factor"), "{error}");
        assert!(error.to_string().contains("0.0 to 1.0"), "{error}");
        assert!(config.apply_option("evs.inactive_timeout", "soon").is_err());
    }

    #[test]
    fn inactive_shorter_than_suspect_is_refused() {
        let mut config = GroupConfig::default();
        config.apply_option("evs.inactive_timeout", "PT1S").unwrap();
        assert!(matches!(
            config.validate(),
            Err(ConfigError::Inconsistent(_))
        ));
        assert!(GroupConfig::default().validate().is_ok());
    }
}
