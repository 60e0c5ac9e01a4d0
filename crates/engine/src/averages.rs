//! The averages and extremes behind Galera's queue, certification and ordering status
//! variables. Each is sampled where the event happens and restarted by `stats_reset`
//! (`FLUSH STATUS`), as Galera's are.

use std::time::Duration;

use base::Nanos;

/// Minimum, maximum and mean of a sampled quantity since the last reset.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Sampled {
    sum: f64,
    count: u64,
    min: Option<u64>,
    max: u64,
}

impl Sampled {
    /// Counts one value.
    pub fn record(&mut self, value: u64) {
        self.sum += value as f64;
        self.count += 1;
        self.min = Some(self.min.map_or(value, |m| m.min(value)));
        self.max = self.max.max(value);
    }

    /// The mean, 0 with no samples.
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum / self.count as f64
        }
    }

    /// The smallest value, 0 with no samples.
    pub fn min(&self) -> u64 {
        self.min.unwrap_or(0)
    }

    /// The largest value, 0 with no samples.
    pub fn max(&self) -> u64 {
        self.max
    }
}

/// How often something happened among the events counted.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Ratio {
    hits: u64,
    total: u64,
}

impl Ratio {
    /// Counts one event, a hit or not.
    pub fn record(&mut self, hit: bool) {
        self.total += 1;
        self.hits += u64::from(hit);
    }

    /// The fraction of hits, 0 with no events.
    pub fn fraction(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            self.hits as f64 / self.total as f64
        }
    }
}

/// Durations as Galera's `evs_repl_latency` shows them: `min/avg/max/stddev/count`, in
/// seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Latency {
    count: u64,
    sum: f64,
    sum_squares: f64,
    min: f64,
    max: f64,
}

impl Latency {
    /// Counts one duration.
    pub fn record(&mut self, took: Duration) {
        let seconds = took.as_secs_f64();
        if self.count == 0 || seconds < self.min {
            self.min = seconds;
        }
        self.max = self.max.max(seconds);
        self.count += 1;
        self.sum += seconds;
        self.sum_squares += seconds * seconds;
    }

    /// `min/avg/max/stddev/count`, in seconds, as Galera prints it.
    pub fn render(&self) -> String {
        if self.count == 0 {
            return "0/0/0/0/0".into();
        }
        let n = self.count as f64;
        let mean = self.sum / n;
        let variance = (self.sum_squares / n - mean * mean).max(0.0);
        format!(
            "{:.9}/{:.9}/{:.9}/{:.9}/{}",
            self.min,
            mean,
            self.max,
            variance.sqrt(),
            self.count
        )
    }
}

/// The group member's flow-control totals since it started: what a window subtracts to
/// show its own part (Galera's `FLUSH STATUS` zeroes `wsrep_flow_control_sent` and
/// `_recv`, and restarts `_paused`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowTotals {
    /// Time the group's order was paused, in nanoseconds.
    pub paused_ns: u64,
    /// Stop requests this member sent.
    pub sent: u64,
    /// Stop requests the group ordered.
    pub received: u64,
}

impl FlowTotals {
    /// What grew since `start`. A total below its start means the member started afresh
    /// (a reconnect) after the window began: all of it is then the window's.
    pub fn since(self, start: FlowTotals) -> FlowTotals {
        let grown = |now: u64, then: u64| now.checked_sub(then).unwrap_or(now);
        FlowTotals {
            paused_ns: grown(self.paused_ns, start.paused_ns),
            sent: grown(self.sent, start.sent),
            received: grown(self.received, start.received),
        }
    }
}

/// Everything `stats_reset` restarts.
#[derive(Clone, Copy, Debug)]
pub struct Window {
    /// When the window began.
    pub since: Nanos,
    /// The group member's flow-control totals when the window began.
    pub flow_at_start: FlowTotals,
    /// Write-sets that had to wait for an earlier one before applying
    /// (`wsrep_apply_waits`).
    pub apply_waits: u64,
    /// Applier queue length, as each remote write-set found it on arrival (Galera's
    /// `wsrep_local_recv_queue_avg` samples its queue the same way).
    pub recv_queue: Sampled,
    /// Local write-sets sent and not yet ordered, sampled at every send.
    pub send_queue: Sampled,
    /// `seqno - depends_on` of every write-set that passed certification.
    pub deps_distance: Sampled,
    /// `seqno - last_seen` of every certified write-set.
    pub cert_interval: Sampled,
    /// Seqnos between an applier's seqno and the last one fully applied, on entry.
    pub apply_window: Sampled,
    /// Appliers that entered while an earlier seqno was still applying.
    pub apply_out_of_order_entry: Ratio,
    /// Appliers that finished before an earlier seqno did.
    pub apply_out_of_order_leave: Ratio,
    /// Seqnos between a committing seqno and the last one committed, on entry.
    pub commit_window: Sampled,
    /// Local write-sets from send to ordered delivery.
    pub replication_latency: Latency,
}

impl Window {
    /// A window that starts at `now`, with the group member's flow-control totals then.
    pub fn new(now: Nanos, flow_now: FlowTotals) -> Window {
        Window {
            since: now,
            flow_at_start: flow_now,
            apply_waits: 0,
            recv_queue: Sampled::default(),
            send_queue: Sampled::default(),
            deps_distance: Sampled::default(),
            cert_interval: Sampled::default(),
            apply_window: Sampled::default(),
            apply_out_of_order_entry: Ratio::default(),
            apply_out_of_order_leave: Ratio::default(),
            commit_window: Sampled::default(),
            replication_latency: Latency::default(),
        }
    }

    /// The member's flow control within this window, from its totals now.
    pub fn flow(&self, flow_now: FlowTotals) -> FlowTotals {
        flow_now.since(self.flow_at_start)
    }

    /// `wsrep_flow_control_paused`: the part of the window the group spent paused.
    pub fn paused_fraction(&self, now: Nanos, flow_now: FlowTotals) -> f64 {
        let elapsed = now.since(self.since) as f64;
        if elapsed <= 0.0 {
            return 0.0;
        }
        let paused = self.flow(flow_now).paused_ns as f64;
        (paused / elapsed).clamp(0.0, 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_keep_mean_and_extremes() {
        let mut queue = Sampled::default();
        assert_eq!((queue.mean(), queue.min(), queue.max()), (0.0, 0, 0));
        for value in [4, 0, 8] {
            queue.record(value);
        }
        assert_eq!(queue.mean(), 4.0);
        assert_eq!((queue.min(), queue.max()), (0, 8));
    }

    #[test]
    fn ratios_and_latencies_render_like_galera() {
        let mut ratio = Ratio::default();
        assert_eq!(ratio.fraction(), 0.0);
        ratio.record(true);
        ratio.record(false);
        ratio.record(false);
        ratio.record(true);
        assert_eq!(ratio.fraction(), 0.5);

        let mut latency = Latency::default();
        assert_eq!(latency.render(), "0/0/0/0/0");
        latency.record(Duration::from_millis(1));
        latency.record(Duration::from_millis(3));
        assert_eq!(
            latency.render(),
            "0.001000000/0.002000000/0.003000000/0.001000000/2"
        );
    }

    fn paused(paused_ns: u64) -> FlowTotals {
        FlowTotals {
            paused_ns,
            ..FlowTotals::default()
        }
    }

    #[test]
    fn the_paused_fraction_counts_only_this_window() {
        let window = Window::new(Nanos(1_000), paused(5_000_000_000));
        let later = Nanos(1_000 + 20_000_000);
        assert_eq!(window.paused_fraction(later, paused(5_000_000_000)), 0.0);
        let fraction = window.paused_fraction(later, paused(5_000_000_000 + 10_000_000));
        assert_eq!(fraction, 0.5);
        assert_eq!(
            window.paused_fraction(later, paused(u64::MAX)),
            1.0,
            "clamped"
        );
        assert_eq!(
            window.paused_fraction(Nanos(1_000), paused(u64::MAX)),
            0.0,
            "no time yet"
        );
    }

    #[test]
    fn flow_control_requests_count_from_the_window_start() {
        let start = FlowTotals {
            paused_ns: 7,
            sent: 279,
            received: 673,
        };
        let window = Window::new(Nanos(0), start);
        assert_eq!(
            window.flow(start),
            FlowTotals::default(),
            "zero right after a reset"
        );
        let later = FlowTotals {
            paused_ns: 9,
            sent: 281,
            received: 680,
        };
        let grown = window.flow(later);
        assert_eq!((grown.paused_ns, grown.sent, grown.received), (2, 2, 7));
        let restarted = FlowTotals {
            paused_ns: 1,
            sent: 3,
            received: 4,
        };
        assert_eq!(
            window.flow(restarted),
            restarted,
            "a member started afresh since the reset: all of its totals are this window's"
        );
    }
}
