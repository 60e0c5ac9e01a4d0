//! The status page's data (`/status.json`): the node's standing, the members as the group
//! knows them, flow control and who pauses it, the gcache window, a transfer in progress,
//! the hottest conflicting tables, the running sums of the timings, and the last minutes
//! of samples the page turns into charts.

use metrics::MetricFamily;
use replicator::Status;
use serde_json::{json, Value as Json};

/// A seqno for JSON: `null` when undefined.
fn seqno(value: base::Seqno) -> Json {
    if value.is_defined() {
        json!(value.0)
    } else {
        Json::Null
    }
}

/// The status page's JSON for node `node_name`.
pub(crate) fn json(
    node_name: &str,
    status: &Status,
    timings: &[MetricFamily],
    samples: Json,
) -> String {
    let document = json!({
        "node": node_name,
        "state": status.state.comment(),
        "primary": status.primary,
        "leader": status.leader,
        "history": status.history.to_string(),
        "view_id": status.view_id,
        "last_committed": seqno(status.last_committed),
        "recv_queue": status.recv_queue.now,
        "send_queue": status.send_queue.now,
        "local_commits": status.totals.local_commits,
        "replicated": status.totals.replicated,
        "received": status.totals.received,
        "cert_failures": status.totals.cert_failures,
        "members": members(status),
        "flow": flow(status),
        "gcache": {
            "from": seqno(status.cache.from),
            "to": seqno(status.cache.to),
            "seconds": status.cache.seconds,
            "bytes": status.cache.disk_bytes,
        },
        "transfer": transfer(status),
        "conflicts": status.conflicts_by_table.iter()
            .map(|(table, count)| json!({"table": table, "count": count}))
            .collect::<Vec<_>>(),
        "timings": sums(timings),
        "samples": samples,
    });
    document.to_string()
}

fn members(status: &Status) -> Vec<Json> {
    status
        .member_rows
        .iter()
        .map(|row| {
            json!({
                "name": row.name,
                "incoming": row.incoming,
                "state": row.state.comment(),
                "committed": seqno(row.committed),
                "cached_from": seqno(row.cached_from),
                "pausing": row.pausing,
            })
        })
        .collect()
}

fn flow(status: &Status) -> Json {
    let flow = &status.flow;
    json!({
        "paused": flow.active,
        "paused_by": flow.paused_by_names(),
        "paused_ns": flow.paused_ns,
        "paused_fraction": flow.paused_fraction,
        "pauses_by": flow.pauses_by,
        "sent": flow.sent,
    })
}

fn transfer(status: &Status) -> Json {
    match &status.transfer {
        None => Json::Null,
        Some(transfer) => json!({
            "kind": if transfer.by_sst { "SST" } else { "IST" },
            "from": seqno(transfer.from),
            "received": seqno(transfer.queued_upto),
            "target": seqno(transfer.target),
            "applied": seqno(status.last_committed),
        }),
    }
}

/// Each timing histogram's running sum and count, from which the page draws mean latency
/// over each polling interval.
fn sums(timings: &[MetricFamily]) -> Json {
    let entries = timings.iter().filter_map(|family| {
        let (sum, count) = crate::history::totals(family)?;
        let name = family.name().trim_start_matches("trireme_").to_owned();
        Some((name, json!({"sum": sum, "count": count})))
    });
    Json::Object(entries.collect())
}
