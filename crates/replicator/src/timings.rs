//! How long write-sets spend in each step of this node's pipeline, as Prometheus
//! histograms for the metrics endpoint: replication (a local transaction's submit until its
//! verdict), certification, the server's apply of a remote write-set, and the wait for a
//! turn in commit order.
//!
//! Recording is an atomic add per observation (the `prometheus` crate's histograms), cheap
//! enough to stay on: nothing is sampled.

use std::time::Duration;

use prometheus::core::Collector;
use prometheus::proto::MetricFamily;
use prometheus::{Histogram, HistogramOpts};

/// Bucket bounds in seconds, shared by every pipeline histogram: from the tens of
/// microseconds certification takes to the seconds of a huge write-set's apply.
pub const TIMING_BUCKETS_SECONDS: [f64; 14] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 2.5,
    10.0,
];
const _: () = {
    let mut i = 1;
    while i < TIMING_BUCKETS_SECONDS.len() {
        assert!(TIMING_BUCKETS_SECONDS[i - 1] < TIMING_BUCKETS_SECONDS[i]);
        i += 1;
    }
};

/// The pipeline's histograms.
pub(crate) struct PipelineTimings {
    pub(crate) replication: Histogram,
    pub(crate) certification: Histogram,
    pub(crate) apply: Histogram,
    pub(crate) commit_wait: Histogram,
}

fn histogram(name: &str, help: &str) -> Histogram {
    let opts = HistogramOpts::new(name, help).buckets(TIMING_BUCKETS_SECONDS.to_vec());
    // The names and buckets are constants checked above: this cannot fail.
    Histogram::with_opts(opts).expect("valid histogram options")
}

impl PipelineTimings {
    pub(crate) fn new() -> PipelineTimings {
        PipelineTimings {
            replication: histogram(
                "trireme_replication_seconds",
                "A local transaction's write-set, from submit until its certification verdict \
                 (ordered by the group and certified).",
            ),
            certification: histogram(
                "trireme_certification_seconds",
                "Decoding and certifying one ordered write-set.",
            ),
            apply: histogram(
                "trireme_apply_seconds",
                "The server's apply of one remote write-set, its commit included.",
            ),
            commit_wait: histogram(
                "trireme_commit_wait_seconds",
                "The wait for a turn in commit order (local and remote write-sets).",
            ),
        }
    }

    /// The histograms, for the metrics endpoint.
    pub(crate) fn families(&self) -> Vec<MetricFamily> {
        [
            &self.replication,
            &self.certification,
            &self.apply,
            &self.commit_wait,
        ]
        .into_iter()
        .flat_map(|histogram| histogram.collect())
        .collect()
    }
}

/// Observes `took` in `histogram`, in seconds.
pub(crate) fn observe(histogram: &Histogram, took: Duration) {
    histogram.observe(took.as_secs_f64());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_step_is_its_own_family_and_counts_what_it_saw() {
        let timings = PipelineTimings::new();
        observe(&timings.certification, Duration::from_micros(70));
        observe(&timings.certification, Duration::from_millis(3));
        let families = timings.families();
        let names: Vec<&str> = families.iter().map(|f| f.name()).collect();
        assert_eq!(
            names,
            [
                "trireme_replication_seconds",
                "trireme_certification_seconds",
                "trireme_apply_seconds",
                "trireme_commit_wait_seconds"
            ]
        );
        let certification = families[1].get_metric()[0].get_histogram();
        assert_eq!(certification.get_sample_count(), 2);
        let within_100us = certification
            .get_bucket()
            .iter()
            .find(|b| b.upper_bound() == 0.000_1)
            .unwrap();
        assert_eq!(within_100us.cumulative_count(), 1);
    }
}
