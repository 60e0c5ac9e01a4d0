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
            ("wsrep_flow_control_paused_by", "node3"),
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
    assert!(lines[1].contains(" 0          node3 "), "{}", lines[1]);
    assert!(
        lines[0].contains(" fc_paused  fc_paused_by "),
        "{}",
        lines[0]
    );
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

/// The arbitrator's settings file holds garbd's keys: the nodes' address, the cluster name,
/// its own listen address on loopback (none on hosts: the default port), and the nodes'
/// provider options except the gcache's, which an arbitrator has none of.
#[test]
fn the_arbitrator_settings_file_takes_the_nodes_options_but_the_gcache() {
    let mut config = ClusterConfig::parse_file_text(
        Path::new("/tmp/tc"),
        "nodes=2\nbase_port=20000\nprovider=/p/libtrireme.so\nsst_method=rsync\nuser=\n\
         provider_options=gcache.size=1G; socket.ssl_key=/k.pem\narbitrator=yes\n",
    )
    .unwrap();
    assert!(config.arbitrator);
    let text = config.render_arbitrator_cfg();
    let line = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{key} = ")))
            .map(str::to_owned)
    };
    assert_eq!(line("address").unwrap(), config.cluster_address());
    assert_eq!(line("group").unwrap(), "trireme");
    let port = crate::config::NodePorts::for_node(20000, 3).group;
    assert_eq!(
        line("options").unwrap(),
        format!("gmcast.listen_addr=tcp://127.0.0.1:{port}; socket.ssl_key=/k.pem")
    );
    config.hosts = true;
    let on_hosts = config.render_arbitrator_cfg();
    assert!(
        on_hosts.contains("options = socket.ssl_key=/k.pem\n"),
        "{on_hosts}"
    );
    assert!(
        ClusterConfig::parse_file_text(Path::new("/tmp/tc"), &config.to_file_text())
            .unwrap()
            .arbitrator
    );
    config.nodes = 9;
    assert!(
        config.validate().is_err(),
        "nine nodes leave no member number for it"
    );
}
