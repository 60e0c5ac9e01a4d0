//! Metric families built from values read at scrape time (status variables, tallies the
//! deterministic core keeps as plain counts), and the Prometheus text they are served as.

use prometheus::proto::{
    Bucket, Counter, Gauge, Histogram, LabelPair, Metric, MetricFamily, MetricType,
};
use prometheus::{Encoder, TextEncoder};

/// Whether a labelled family counts up or goes both ways.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Only grows (until the node restarts).
    Counter,
    /// Goes up and down.
    Gauge,
}

fn family(name: &str, help: &str, kind: MetricType, metrics: Vec<Metric>) -> MetricFamily {
    let mut family = MetricFamily::default();
    family.set_name(name.to_owned());
    family.set_help(help.to_owned());
    family.set_field_type(kind);
    family.set_metric(metrics);
    family
}

fn valued(kind: Kind, value: f64, labels: Vec<LabelPair>) -> Metric {
    let mut metric = Metric::default();
    match kind {
        Kind::Counter => {
            let mut counter = Counter::default();
            counter.set_value(value);
            metric.set_counter(counter);
        }
        Kind::Gauge => {
            let mut gauge = Gauge::default();
            gauge.set_value(value);
            metric.set_gauge(gauge);
        }
    }
    metric.set_label(labels);
    metric
}

fn prometheus_type(kind: Kind) -> MetricType {
    match kind {
        Kind::Counter => MetricType::COUNTER,
        Kind::Gauge => MetricType::GAUGE,
    }
}

/// One unlabelled value.
pub fn single(kind: Kind, name: &str, help: &str, value: f64) -> MetricFamily {
    let metric = valued(kind, value, Vec::new());
    family(name, help, prometheus_type(kind), vec![metric])
}

/// One value per label value (`table="sbtest.sbtest1"`, ...); empty `values` give a family
/// with no series, which the text format leaves out.
pub fn labelled(
    kind: Kind,
    name: &str,
    help: &str,
    label: &str,
    values: &[(String, f64)],
) -> MetricFamily {
    let metrics = values
        .iter()
        .map(|(label_value, value)| {
            let mut pair = LabelPair::default();
            pair.set_name(label.to_owned());
            pair.set_value(label_value.clone());
            valued(kind, *value, vec![pair])
        })
        .collect();
    family(name, help, prometheus_type(kind), metrics)
}

/// A histogram from plain counts: `within[i]` observations fell at or under `bounds[i]` and
/// above the bound before (not cumulative); `count` includes those above the last bound.
pub fn histogram(
    name: &str,
    help: &str,
    bounds: &[f64],
    within: &[u64],
    count: u64,
    sum: f64,
) -> MetricFamily {
    assert_eq!(bounds.len(), within.len(), "one count per bucket");
    let mut cumulative = 0;
    let buckets = bounds
        .iter()
        .zip(within)
        .map(|(bound, n)| {
            cumulative += n;
            let mut bucket = Bucket::default();
            bucket.set_upper_bound(*bound);
            bucket.set_cumulative_count(cumulative);
            bucket
        })
        .collect();
    debug_assert!(
        cumulative <= count,
        "{name}: buckets hold more than the count"
    );
    let mut histogram = Histogram::default();
    histogram.set_sample_count(count);
    histogram.set_sample_sum(sum);
    histogram.set_bucket(buckets);
    let mut metric = Metric::default();
    metric.set_histogram(histogram);
    family(name, help, MetricType::HISTOGRAM, vec![metric])
}

/// The Prometheus text exposition of `families`; a family with no series (a labelled one
/// with nothing to count yet) is left out, as the text format has nothing to say for it.
pub fn encode(families: &[MetricFamily]) -> Result<String, prometheus::Error> {
    let present: Vec<MetricFamily> = families
        .iter()
        .filter(|family| !family.get_metric().is_empty())
        .cloned()
        .collect();
    let mut bytes = Vec::new();
    TextEncoder::new().encode(&present, &mut bytes)?;
    // The encoder writes only UTF-8.
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The content type of [`encode`]'s text.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_and_histograms_read_back_as_prometheus_text() {
        let families = [
            single(Kind::Gauge, "wsrep_local_recv_queue", "Queue.", 3.0),
            labelled(
                Kind::Counter,
                "trireme_cert_conflicts_total",
                "Conflicts.",
                "table",
                &[("shop.orders".to_owned(), 7.0)],
            ),
            histogram(
                "trireme_pause_seconds",
                "Pauses.",
                &[0.1, 1.0],
                &[2, 1],
                4,
                9.5,
            ),
            labelled(
                Kind::Counter,
                "trireme_nothing_yet",
                "Empty.",
                "member",
                &[],
            ),
        ];
        let text = encode(&families).unwrap();
        for line in [
            "# TYPE wsrep_local_recv_queue gauge",
            "wsrep_local_recv_queue 3",
            "trireme_cert_conflicts_total{table=\"shop.orders\"} 7",
            "trireme_pause_seconds_bucket{le=\"0.1\"} 2",
            "trireme_pause_seconds_bucket{le=\"1\"} 3",
            "trireme_pause_seconds_bucket{le=\"+Inf\"} 4",
            "trireme_pause_seconds_sum 9.5",
            "trireme_pause_seconds_count 4",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "{line:?} missing from:\n{text}"
            );
        }
        assert!(!text.contains("trireme_nothing_yet"), "{text}");
    }
}
