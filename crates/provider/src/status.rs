//! The replicator's typed [`Status`] under the wsrep names MariaDB shows, in one place.
//! Which names the provider reports, and their types, come from `options::status_vars`;
//! a test holds this mapping to that list.

use options::status_vars::{self, ValueKind};
use replicator::{Status, PROTOCOL_VERSION};

/// A status value in the type `stats_get` hands it over.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Value {
    /// `WSREP_VAR_INT64`.
    Int(i64),
    /// `WSREP_VAR_DOUBLE`.
    Double(f64),
    /// `WSREP_VAR_STRING`.
    Text(String),
}

impl Value {
    /// The catalogue's type for this value.
    fn kind(&self) -> ValueKind {
        match self {
            Value::Int(_) => ValueKind::Int,
            Value::Double(_) => ValueKind::Double,
            Value::Text(_) => ValueKind::Text,
        }
    }
}

/// A counter as wsrep's signed 64-bit value (saturating: no counter gets near it).
fn int(value: u64) -> Value {
    Value::Int(i64::try_from(value).unwrap_or(i64::MAX))
}

fn text(value: impl ToString) -> Value {
    Value::Text(value.to_string())
}

/// What the replicator and group protocols are, as Galera 4 reports them.
const REPLICATOR_PROTOCOL: i64 = 10;
const GCS_PROTOCOL: i64 = 1;

/// Every provider-owned status variable with its value, in the catalogue's order.
pub(crate) fn provider_values(status: &Status) -> Vec<(&'static str, Value)> {
    let values = named_values(status);
    status_vars::provider_vars()
        .map(|var| {
            let value = values
                .iter()
                .find(|(name, _)| *name == var.name)
                .map(|(_, value)| value.clone())
                .unwrap_or_else(|| panic!("status variable {} has no value", var.name));
            (var.name, value)
        })
        .collect()
}

/// The values by name (order does not matter here).
fn named_values(s: &Status) -> Vec<(&'static str, Value)> {
    let mut values = identity_values(s);
    values.extend(counter_values(s));
    values.extend(queue_and_flow_values(s));
    values.extend(apply_values(s));
    values
}

fn identity_values(s: &Status) -> Vec<(&'static str, Value)> {
    let incoming: Vec<&str> = s.members.iter().map(|m| m.incoming.as_str()).collect();
    vec![
        ("local_state_uuid", text(s.history)),
        ("protocol_version", Value::Int(REPLICATOR_PROTOCOL)),
        ("protocol_application", Value::Int(PROTOCOL_VERSION.into())),
        ("protocol_replicator", Value::Int(REPLICATOR_PROTOCOL)),
        ("protocol_gcs", Value::Int(GCS_PROTOCOL)),
        ("last_committed", Value::Int(s.last_committed.0)),
        ("local_state", int(s.state.wsrep_member_status().into())),
        ("local_state_comment", text(s.state.comment())),
        ("raft_leader", int(s.leader.into())),
        ("incoming_addresses", text(incoming.join(","))),
        ("cluster_weight", text(s.cluster_weight)),
        ("desync_count", text(s.desync_count)),
        ("evs_delayed", text("")),
        ("evs_evict_list", text("")),
        ("evs_repl_latency", text(&s.replication_latency)),
        (
            "evs_state",
            text(if s.members.is_empty() {
                "GATHER"
            } else {
                "OPERATIONAL"
            }),
        ),
        ("gcomm_uuid", text(s.member)),
        ("gmcast_segment", text(0)),
    ]
}

fn counter_values(s: &Status) -> Vec<(&'static str, Value)> {
    let t = &s.totals;
    vec![
        ("replicated", int(t.replicated)),
        ("replicated_bytes", int(t.replicated_bytes)),
        ("repl_keys", int(t.repl_keys)),
        ("repl_keys_bytes", int(t.repl_keys_bytes)),
        ("repl_data_bytes", int(t.repl_data_bytes)),
        ("repl_other_bytes", int(t.repl_other_bytes())),
        ("received", int(t.received)),
        ("received_bytes", int(t.received_bytes)),
        ("local_commits", int(t.local_commits)),
        ("local_cert_failures", int(t.cert_failures)),
        ("local_replays", int(t.replays)),
        ("causal_reads", int(t.causal_reads)),
        ("local_fragments_replicated", int(t.fragments_replicated)),
        ("local_streaming_rollbacks", int(t.streaming_rollbacks)),
        ("local_size_exceeded", int(t.size_exceeded)),
        ("open_transactions", int(s.open_transactions)),
        ("open_connections", int(s.open_connections)),
        ("streaming_transactions", int(s.streaming_transactions)),
        ("streaming_fragments", int(s.streaming_fragments)),
    ]
}

fn queue_and_flow_values(s: &Status) -> Vec<(&'static str, Value)> {
    let (send, recv, flow, cache) = (&s.send_queue, &s.recv_queue, &s.flow, &s.cache);
    let reach_seqnos = if cache.from.is_defined() {
        cache.to.0 - cache.from.0 + 1
    } else {
        0
    };
    vec![
        ("local_send_queue", int(send.now)),
        ("local_send_queue_max", int(send.max)),
        ("local_send_queue_min", int(send.min)),
        ("local_send_queue_avg", Value::Double(send.mean)),
        ("local_recv_queue", int(recv.now)),
        ("local_recv_queue_max", int(recv.max)),
        ("local_recv_queue_min", int(recv.min)),
        ("local_recv_queue_avg", Value::Double(recv.mean)),
        ("local_cached_downto", Value::Int(cache.from.0)),
        ("ist_reach_seqnos", Value::Int(reach_seqnos)),
        ("ist_reach_seconds", Value::Double(cache.seconds)),
        ("gcache_disk_bytes", int(cache.disk_bytes)),
        ("flow_control_paused_ns", int(flow.paused_ns)),
        ("flow_control_paused", Value::Double(flow.paused_fraction)),
        ("flow_control_sent", int(flow.sent)),
        ("flow_control_recv", int(flow.received)),
        ("flow_control_active", text(flow.active)),
        ("flow_control_requested", text(flow.requested)),
        ("flow_control_paused_by", text(&flow.paused_by)),
    ]
}

fn apply_values(s: &Status) -> Vec<(&'static str, Value)> {
    let a = &s.apply;
    vec![
        ("cert_deps_distance", Value::Double(a.deps_distance)),
        ("apply_oooe", Value::Double(a.out_of_order_entry)),
        ("apply_oool", Value::Double(a.out_of_order_leave)),
        ("apply_window", Value::Double(a.apply_window)),
        ("apply_waits", int(a.apply_waits)),
        // Commits are strictly in seqno order.
        ("commit_oooe", Value::Double(0.0)),
        ("commit_oool", Value::Double(0.0)),
        ("commit_window", Value::Double(a.commit_window)),
        ("cert_index_size", int(a.cert_index_size)),
        ("cert_interval", Value::Double(a.cert_interval)),
    ]
}

/// The values of a node that is not connected: every number 0, every text empty.
pub(crate) fn unconnected_values() -> Vec<(&'static str, Value)> {
    status_vars::provider_vars()
        .map(|var| {
            let value = match var.kind {
                ValueKind::Int => Value::Int(0),
                ValueKind::Double => Value::Double(0.0),
                ValueKind::Text | ValueKind::Bool => Value::Text(String::new()),
            };
            (var.name, value)
        })
        .collect()
}

/// Checks a value's type against the catalogue (for the tests and debug builds).
pub(crate) fn kind_matches(name: &str, value: &Value) -> bool {
    status_vars::lookup(name).is_some_and(|var| var.kind == value.kind())
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::collections::HashSet;

    use base::{NodeState, Seqno, Uuid};
    use replicator::{ApplyStatus, CacheReach, FlowStatus, MemberOut, QueueStatus, Totals};

    fn status() -> Status {
        Status {
            history: Uuid::NIL,
            last_committed: Seqno(41),
            state: NodeState::Synced,
            ready: true,
            member: Uuid::NIL,
            members: vec![
                MemberOut {
                    uuid: Uuid::NIL,
                    name: "a".into(),
                    incoming: "10.0.0.1:3306".into(),
                },
                MemberOut {
                    uuid: Uuid::NIL,
                    name: "b".into(),
                    incoming: "10.0.0.2:3306".into(),
                },
            ],
            cluster_weight: 2,
            view_id: 3,
            primary: true,
            leader: true,
            desync_count: 0,
            totals: Totals {
                replicated_bytes: 100,
                repl_keys_bytes: 30,
                repl_data_bytes: 50,
                ..Totals::default()
            },
            send_queue: QueueStatus::default(),
            recv_queue: QueueStatus {
                now: 2,
                min: 0,
                max: 9,
                mean: 1.5,
            },
            flow: FlowStatus {
                active: true,
                ..FlowStatus::default()
            },
            apply: ApplyStatus::default(),
            cache: CacheReach {
                from: Seqno(10),
                to: Seqno(41),
                seconds: 2.0,
                disk_bytes: 4096,
            },
            conflicts_by_table: Vec::new(),
            transfer: None,
            member_rows: Vec::new(),
            open_transactions: 0,
            open_connections: 0,
            streaming_transactions: 0,
            streaming_fragments: 0,
            replication_latency: "0/0/0/0/0".into(),
        }
    }

    fn value<'a>(values: &'a [(&str, Value)], name: &str) -> &'a Value {
        &values.iter().find(|(n, _)| *n == name).unwrap().1
    }

    #[test]
    fn every_provider_variable_has_one_value_of_its_catalogued_type() {
        let named = named_values(&status());
        let names: HashSet<&str> = named.iter().map(|(name, _)| *name).collect();
        assert_eq!(names.len(), named.len(), "a name given twice");
        let catalogue: HashSet<&str> = status_vars::provider_vars().map(|v| v.name).collect();
        assert_eq!(names, catalogue);
        for (name, value) in &named {
            assert!(kind_matches(name, value), "{name}: {value:?}");
        }
        for (name, value) in unconnected_values() {
            assert!(kind_matches(name, &value), "{name}: {value:?}");
        }
    }

    #[test]
    fn values_say_what_the_status_holds() {
        let values = provider_values(&status());
        assert_eq!(value(&values, "last_committed"), &Value::Int(41));
        assert_eq!(value(&values, "local_state"), &Value::Int(4));
        assert_eq!(value(&values, "local_state_comment"), &text("Synced"));
        assert_eq!(value(&values, "repl_other_bytes"), &Value::Int(20));
        assert_eq!(value(&values, "local_recv_queue_avg"), &Value::Double(1.5));
        assert_eq!(value(&values, "ist_reach_seqnos"), &Value::Int(32));
        assert_eq!(value(&values, "flow_control_active"), &text("true"));
        assert_eq!(value(&values, "cluster_weight"), &text("2"));
        assert_eq!(
            value(&values, "incoming_addresses"),
            &text("10.0.0.1:3306,10.0.0.2:3306")
        );
        assert_eq!(value(&values, "evs_state"), &text("OPERATIONAL"));
    }
}
