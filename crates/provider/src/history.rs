//! The last minutes of the node, one sample a second, for the status page's charts: a
//! page opened now shows what happened before it was opened.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use metrics::MetricFamily;
use replicator::Status;
use serde_json::{json, Value as Json};

use crate::lock;

/// Samples kept: five minutes at one a second.
pub(crate) const HISTORY_SAMPLES: usize = 300;

/// One moment of the node.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Sample {
    /// Milliseconds since the Unix epoch.
    pub(crate) at_ms: u64,
    /// The node's last committed seqno: the cluster's commits, on a synced node.
    pub(crate) committed: i64,
    /// Running sums and counts of the replication and commit-wait histograms.
    pub(crate) replication: (f64, u64),
    pub(crate) commit_wait: (f64, u64),
    /// The members whose stop held the group paused at that moment.
    pub(crate) paused_by: Vec<String>,
    /// Total time paused so far.
    pub(crate) paused_ns: u64,
}

/// A histogram family's running sum and count (of its first series).
pub(crate) fn totals(family: &MetricFamily) -> Option<(f64, u64)> {
    let histogram = family.get_metric().first()?.get_histogram();
    Some((histogram.get_sample_sum(), histogram.get_sample_count()))
}

/// The running sum and count of the histogram family `name`; zero when it is not there.
fn running(timings: &[MetricFamily], name: &str) -> (f64, u64) {
    timings
        .iter()
        .find(|family| family.name() == name)
        .and_then(totals)
        .unwrap_or((0.0, 0))
}

impl Sample {
    pub(crate) fn of(status: &Status, timings: &[MetricFamily]) -> Sample {
        let at_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        Sample {
            at_ms,
            committed: status.last_committed.0,
            replication: running(timings, "trireme_replication_seconds"),
            commit_wait: running(timings, "trireme_commit_wait_seconds"),
            paused_by: status
                .flow
                .paused_by_names()
                .into_iter()
                .map(str::to_owned)
                .collect(),
            paused_ns: status.flow.paused_ns,
        }
    }

    fn to_json(&self) -> Json {
        json!({
            "t": self.at_ms,
            "committed": self.committed,
            "replication_sum": self.replication.0,
            "replication_count": self.replication.1,
            "commit_wait_sum": self.commit_wait.0,
            "commit_wait_count": self.commit_wait.1,
            "paused_by": self.paused_by,
            "paused_ns": self.paused_ns,
        })
    }
}

/// The ring of samples.
#[derive(Default)]
pub(crate) struct History {
    samples: Mutex<VecDeque<Sample>>,
}

impl History {
    pub(crate) fn push(&self, sample: Sample) {
        let mut samples = lock(&self.samples);
        if samples.len() == HISTORY_SAMPLES {
            samples.pop_front();
        }
        samples.push_back(sample);
        debug_assert!(samples.len() <= HISTORY_SAMPLES);
    }

    pub(crate) fn to_json(&self) -> Json {
        Json::Array(lock(&self.samples).iter().map(Sample::to_json).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(committed: i64) -> Sample {
        Sample {
            at_ms: committed as u64 * 1000,
            committed,
            replication: (0.5, 10),
            commit_wait: (0.1, 10),
            paused_by: vec!["node3".into()],
            paused_ns: 7,
        }
    }

    #[test]
    fn the_ring_keeps_the_latest_samples_in_order() {
        let history = History::default();
        for n in 0..HISTORY_SAMPLES as i64 + 5 {
            history.push(sample(n));
        }
        let json = history.to_json();
        let samples = json.as_array().unwrap();
        assert_eq!(samples.len(), HISTORY_SAMPLES);
        assert_eq!(samples[0]["committed"], 5);
        assert_eq!(
            samples[HISTORY_SAMPLES - 1]["committed"],
            HISTORY_SAMPLES as i64 + 4
        );
        assert_eq!(samples[0]["paused_by"][0], "node3");
    }
}
