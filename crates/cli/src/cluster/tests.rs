use super::*;

fn row(node: usize, pid: Option<u32>, vars: &[(&str, &str)]) -> NodeStatus {
    NodeStatus {
        node,
        pid,
        suspended: false,
        vars: vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        error: None,
        sst_progress: None,
    }
}

#[test]
fn status_table_shows_live_and_down_nodes() {
    let synced = row(
        1,
        Some(4242),
        &[
            ("wsrep_local_state_comment", "Synced"),
            ("wsrep_ready", "ON"),
            ("wsrep_last_committed", "17"),
            ("wsrep_local_recv_queue", "0"),
            ("wsrep_flow_control_paused", "0"),
            ("wsrep_cluster_size", "2"),
            ("wsrep_cluster_status", "Primary"),
            ("wsrep_streaming_transactions", "1"),
            ("wsrep_streaming_fragments", "57"),
        ],
    );
    assert!(synced.is_synced());
    assert_eq!(synced.cluster_size(), Some(2));
    assert_eq!(synced.last_committed(), Some(17));
    let mut unreachable = row(3, Some(4343), &[]);
    unreachable.error = Some("timed out".to_string());
    let table = format_status_table(&[synced, row(2, None, &[]), unreachable]);
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("node   pid   alive  state        last_committed"));
    assert!(lines[1].starts_with("node1  4242  yes    Synced       17"));
    assert!(lines[1].ends_with("Primary         1 trx/57 frags"));
    assert!(lines[2].starts_with("node2  -     no     down         -"));
    assert!(lines[3].starts_with("node3  4343  yes    unreachable"));
    assert_eq!(lines[4], "node3: timed out");
}

#[test]
fn not_synced_until_ready() {
    let joining = row(
        2,
        Some(1),
        &[(
            "wsrep_local_state_comment",
            "Joining: receiving State Transfer",
        )],
    );
    assert!(!joining.is_synced());
    let not_ready = row(
        2,
        Some(1),
        &[
            ("wsrep_local_state_comment", "Synced"),
            ("wsrep_ready", "OFF"),
        ],
    );
    assert!(!not_ready.is_synced());
}

#[test]
fn up_options_default_to_nothing_recorded() {
    let o = UpOptions::new("/tmp/x");
    assert_eq!(o.dir, PathBuf::from("/tmp/x"));
    assert!(o.nodes.is_none() && o.provider.is_none() && o.base_port.is_none());
    assert_eq!(o.timeouts.node_start, Duration::from_secs(120));
}
