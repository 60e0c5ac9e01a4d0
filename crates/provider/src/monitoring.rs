//! What the metrics endpoint (`metrics.listen_addr`, the `metrics` crate) serves for this
//! node: the replicator's status under the names `SHOW STATUS` gives it, its histograms and
//! tallies as Prometheus families, and the status page's JSON.

use std::sync::{Arc, Weak};

use metrics::families::{histogram, labelled, single, Kind};
use metrics::{MetricFamily, Source};
use replicator::{Replicator, Status, PAUSE_BUCKET_BOUNDS_NS};

use crate::history::{History, Sample};
use crate::status::{provider_values, Value};

/// The node's values, read at each request. It holds the replicator weakly: the endpoint
/// never keeps a freed provider alive.
pub(crate) struct NodeSource {
    replicator: Weak<Replicator>,
    node_name: String,
    history: History,
    /// `gcomm.thread_nice`: the endpoint's thread runs as far below the server as the
    /// provider's other threads.
    thread_nice: u8,
}

impl NodeSource {
    pub(crate) fn new(
        replicator: &Arc<Replicator>,
        node_name: &str,
        thread_nice: u8,
    ) -> NodeSource {
        NodeSource {
            replicator: Arc::downgrade(replicator),
            node_name: node_name.to_owned(),
            history: History::default(),
            thread_nice,
        }
    }
}

impl Source for NodeSource {
    fn metrics(&self) -> Vec<MetricFamily> {
        let Some(replicator) = self.replicator.upgrade() else {
            return Vec::new();
        };
        let status = replicator.status();
        let mut families = status_families(&status);
        families.extend(flow_families(&status));
        families.extend(member_families(&status));
        families.extend(replicator.timing_families());
        families
    }

    fn status_json(&self) -> String {
        match self.replicator.upgrade() {
            Some(replicator) => {
                let timings = replicator.timing_families();
                let status = replicator.status();
                let samples = self.history.to_json();
                crate::status_page::json(&self.node_name, &status, &timings, samples)
            }
            None => "{}".to_owned(),
        }
    }

    fn sample(&self) {
        if let Some(replicator) = self.replicator.upgrade() {
            let timings = replicator.timing_families();
            self.history
                .push(Sample::of(&replicator.status(), &timings));
        }
    }

    fn serving_thread_started(&self) {
        transport::priority::lower_this_thread(self.thread_nice);
    }
}

/// A status value as a number, when it is one: integers and doubles, and text that holds a
/// number (`wsrep_cluster_weight`), as mysqld_exporter reads them.
pub(crate) fn numeric(value: &Value) -> Option<f64> {
    match value {
        Value::Int(number) => Some(*number as f64),
        Value::Double(number) => Some(*number),
        Value::Text(text) => text.trim().parse::<f64>().ok().filter(|n| n.is_finite()),
    }
}

/// Every numeric provider status variable, under its `SHOW STATUS` name, and
/// `wsrep_evs_repl_latency` split into its five numbers.
fn status_families(status: &Status) -> Vec<MetricFamily> {
    let mut families: Vec<MetricFamily> = provider_values(status)
        .iter()
        .filter_map(|(name, value)| {
            let number = numeric(value)?;
            let full = format!("wsrep_{name}");
            let help = format!("{full}, as SHOW STATUS shows it.");
            Some(single(Kind::Gauge, &full, &help, number))
        })
        .collect();
    families.extend(view_families(status));
    let parts: Vec<f64> = status
        .replication_latency
        .split('/')
        .filter_map(|part| part.parse().ok())
        .collect();
    if let [min, avg, max, stddev, count] = parts[..] {
        let stats = [
            ("min", min),
            ("avg", avg),
            ("max", max),
            ("stddev", stddev),
            ("count", count),
        ];
        let values: Vec<(String, f64)> = stats.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect();
        families.push(labelled(
            Kind::Gauge,
            "trireme_evs_repl_latency",
            "wsrep_evs_repl_latency's five numbers (seconds, and the sample count) since the \
             last FLUSH STATUS.",
            "stat",
            &values,
        ));
    }
    families
}

/// The values `SHOW STATUS` takes from the views the provider hands the server rather than
/// from `stats_get`: the same numbers, from the same view.
fn view_families(status: &Status) -> Vec<MetricFamily> {
    let index = status
        .members
        .iter()
        .position(|member| member.uuid == status.member)
        .map_or(-1.0, |i| i as f64);
    let primary = status.primary && !status.members.is_empty();
    let values = [
        ("wsrep_cluster_size", status.members.len() as f64),
        ("wsrep_cluster_conf_id", status.view_id as f64),
        ("wsrep_local_index", index),
        ("wsrep_ready", if status.ready { 1.0 } else { 0.0 }),
        (
            "wsrep_cluster_status_primary",
            if primary { 1.0 } else { 0.0 },
        ),
    ];
    values
        .iter()
        .map(|(name, value)| {
            let help = format!("{name}: the view's, as the server shows it (1 for ON).");
            single(Kind::Gauge, name, &help, *value)
        })
        .collect()
}

fn flow_families(status: &Status) -> Vec<MetricFamily> {
    let lengths = &status.flow.pause_lengths;
    let bounds: Vec<f64> = PAUSE_BUCKET_BOUNDS_NS
        .iter()
        .map(|ns| *ns as f64 / 1e9)
        .collect();
    let pauses_by: Vec<(String, f64)> = status
        .flow
        .pauses_by
        .iter()
        .map(|(name, count)| (name.clone(), *count as f64))
        .collect();
    let conflicts: Vec<(String, f64)> = status
        .conflicts_by_table
        .iter()
        .map(|(table, count)| (table.clone(), *count as f64))
        .collect();
    vec![
        histogram(
            "trireme_flow_control_pause_seconds",
            "How long the finished flow-control pauses of the group's order lasted.",
            &bounds,
            &lengths.within,
            lengths.count,
            lengths.sum_ns as f64 / 1e9,
        ),
        labelled(
            Kind::Counter,
            "trireme_flow_control_pauses_total",
            "Flow-control pauses started, by the member whose stop began them.",
            "member",
            &pauses_by,
        ),
        labelled(
            Kind::Counter,
            "trireme_cert_conflicts_total",
            "Certification conflicts by table (the tables with the most).",
            "table",
            &conflicts,
        ),
    ]
}

fn member_families(status: &Status) -> Vec<MetricFamily> {
    let rows = &status.member_rows;
    let by_member = |value: &dyn Fn(&replicator::MemberRow) -> f64| -> Vec<(String, f64)> {
        rows.iter()
            .map(|row| (row.name.clone(), value(row)))
            .collect()
    };
    let mut families = vec![
        labelled(
            Kind::Gauge,
            "trireme_member_committed_seqno",
            "The last seqno each member reported committed.",
            "member",
            &by_member(&|row| row.committed.0 as f64),
        ),
        labelled(
            Kind::Gauge,
            "trireme_member_state",
            "Each member's node state, as wsrep_local_state numbers it.",
            "member",
            &by_member(&|row| f64::from(row.state.wsrep_member_status())),
        ),
        labelled(
            Kind::Gauge,
            "trireme_member_pausing",
            "1 while the member's flow-control stop holds the group paused.",
            "member",
            &by_member(&|row| if row.pausing { 1.0 } else { 0.0 }),
        ),
    ];
    if let Some(transfer) = &status.transfer {
        let done = transfer.queued_upto.0.max(transfer.from.0);
        families.push(single(
            Kind::Gauge,
            "trireme_transfer_target_seqno",
            "The seqno this joining node's state transfer ends at.",
            transfer.target.0 as f64,
        ));
        families.push(single(
            Kind::Gauge,
            "trireme_transfer_received_seqno",
            "Everything up to this seqno arrived by this joining node's state transfer.",
            done as f64,
        ));
    }
    families
}
