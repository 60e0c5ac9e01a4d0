//! `trireme status`: the cluster table of any cluster, not only one this tool started, read
//! from the nodes' metrics endpoints (`metrics.listen_addr`) or over SQL (`SHOW STATUS`).
//!
//! Each node named gives its full row. A node read by its endpoint also lists every member
//! as the group knows it, so the members not named get a row with their state, committed
//! seqno and whether they pause the cluster.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result};
use mysql::prelude::Queryable;

use crate::cluster::status::aligned;
use crate::endpoint::Reader;

/// How long connecting to a node over SQL may take, and each read after.
const SQL_TIMEOUT: Duration = Duration::from_secs(5);

/// Where a node is read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeAddress {
    /// Its metrics endpoint, `host:port`.
    Metrics(String),
    /// Its SQL port, `host:port`, with the account to read status as.
    Sql {
        /// `host:port`.
        address: String,
        /// The account.
        user: String,
        /// Its password (empty for none).
        password: String,
    },
}

/// One row of the table.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RemoteRow {
    /// `wsrep_node_name`.
    pub name: String,
    /// Where it was read, or `(member list)` for a member only another node told of.
    pub source: String,
    /// The status values read, by their `SHOW STATUS` names.
    pub vars: BTreeMap<String, String>,
    /// Why it could not be read.
    pub error: Option<String>,
}

/// A metrics value as `SHOW STATUS` would show it: whole numbers without a fraction.
fn shown(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{value:.0}")
    } else {
        format!("{value}")
    }
}

/// The node's row from its endpoint, and the members its group knows.
fn read_metrics(reader: &Reader, address: &str) -> Result<(RemoteRow, Vec<RemoteRow>)> {
    let scrape = reader.scrape(address)?;
    let page = reader.status_json(address)?;
    let mut vars: BTreeMap<String, String> = scrape
        .names()
        .into_iter()
        .filter(|name| name.starts_with("wsrep_"))
        .filter_map(|name| Some((name.clone(), shown(scrape.value(&name)?))))
        .collect();
    let text = |key: &str| page[key].as_str().unwrap_or_default().to_owned();
    vars.insert("wsrep_local_state_comment".into(), text("state"));
    let paused_by: Vec<&str> = page["flow"]["paused_by"]
        .as_array()
        .map(|names| names.iter().filter_map(|n| n.as_str()).collect())
        .unwrap_or_default();
    vars.insert("wsrep_flow_control_paused_by".into(), paused_by.join(","));
    let primary = page["primary"].as_bool().unwrap_or(false);
    let status = if primary { "Primary" } else { "non-Primary" };
    vars.insert("wsrep_cluster_status".into(), status.into());
    let row = RemoteRow {
        name: text("node"),
        source: address.to_owned(),
        vars,
        error: None,
    };
    let members = page["members"]
        .as_array()
        .map(|members| members.iter().map(member_row).collect())
        .unwrap_or_default();
    Ok((row, members))
}

/// A member as another node's group knows it.
fn member_row(member: &serde_json::Value) -> RemoteRow {
    let mut vars = BTreeMap::new();
    let state = member["state"].as_str().unwrap_or_default();
    vars.insert("wsrep_local_state_comment".into(), state.to_owned());
    if let Some(committed) = member["committed"].as_i64() {
        vars.insert("wsrep_last_committed".into(), committed.to_string());
    }
    if member["pausing"].as_bool() == Some(true) {
        let name = member["name"].as_str().unwrap_or_default();
        vars.insert("wsrep_flow_control_paused_by".into(), name.to_owned());
    }
    RemoteRow {
        name: member["name"].as_str().unwrap_or_default().to_owned(),
        source: "(member list)".into(),
        vars,
        error: None,
    }
}

fn read_sql(address: &str, user: &str, password: &str) -> Result<RemoteRow> {
    let (host, port) = address
        .rsplit_once(':')
        .with_context(|| format!("{address}: expected host:port"))?;
    let port: u16 = port
        .parse()
        .with_context(|| format!("{address}: bad port"))?;
    let opts = mysql::OptsBuilder::new()
        .ip_or_hostname(Some(host))
        .tcp_port(port)
        .user(Some(user))
        .pass((!password.is_empty()).then_some(password))
        .tcp_connect_timeout(Some(SQL_TIMEOUT))
        .read_timeout(Some(SQL_TIMEOUT))
        .write_timeout(Some(SQL_TIMEOUT));
    let mut conn = mysql::Conn::new(opts).with_context(|| format!("connect to {address}"))?;
    let vars: BTreeMap<String, String> = conn
        .query("SHOW STATUS LIKE 'wsrep_%'")
        .with_context(|| format!("{address}: SHOW STATUS"))?
        .into_iter()
        .collect();
    let name: Option<String> = conn.query_first("SELECT @@wsrep_node_name")?;
    Ok(RemoteRow {
        name: name.unwrap_or_default(),
        source: address.to_owned(),
        vars,
        error: None,
    })
}

/// Reads every node named (endpoints with `reader`), then adds the members they told of and
/// were not named.
pub fn read(nodes: &[NodeAddress], reader: &Reader) -> Vec<RemoteRow> {
    let mut rows: Vec<RemoteRow> = Vec::new();
    let mut told: Vec<RemoteRow> = Vec::new();
    for node in nodes {
        let (label, read) = match node {
            NodeAddress::Metrics(address) => (address, read_metrics(reader, address)),
            NodeAddress::Sql {
                address,
                user,
                password,
            } => (
                address,
                read_sql(address, user, password).map(|r| (r, Vec::new())),
            ),
        };
        match read {
            Ok((row, members)) => {
                rows.push(row);
                told.extend(members);
            }
            Err(error) => rows.push(RemoteRow {
                source: label.clone(),
                error: Some(format!("{error:#}")),
                ..RemoteRow::default()
            }),
        }
    }
    for member in told {
        if !rows.iter().any(|row| row.name == member.name) {
            rows.push(member);
        }
    }
    rows
}

/// The table `trireme cluster status` prints, for rows read from anywhere.
pub fn format_remote_table(rows: &[RemoteRow]) -> String {
    let header = [
        "node",
        "read from",
        "state",
        "last_committed",
        "recv_queue",
        "fc_paused",
        "fc_paused_by",
        "cluster_size",
        "cluster_status",
    ];
    let mut table: Vec<Vec<String>> = vec![header.iter().map(|h| h.to_string()).collect()];
    for row in rows {
        let var = |name: &str| match row.vars.get(name) {
            Some(value) if !value.is_empty() => value.clone(),
            _ => "-".to_owned(),
        };
        let state = if row.error.is_some() {
            "unreachable".to_owned()
        } else {
            var("wsrep_local_state_comment")
        };
        table.push(vec![
            if row.name.is_empty() {
                "?".into()
            } else {
                row.name.clone()
            },
            row.source.clone(),
            state,
            var("wsrep_last_committed"),
            var("wsrep_local_recv_queue"),
            var("wsrep_flow_control_paused"),
            var("wsrep_flow_control_paused_by"),
            var("wsrep_cluster_size"),
            var("wsrep_cluster_status"),
        ]);
    }
    let mut out = aligned(&table);
    for row in rows {
        if let Some(error) = &row.error {
            out.push_str(&format!("{}: {error}\n", row.source));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_told_of_fill_the_rows_not_read_and_failures_are_named() {
        let page = serde_json::json!({"members": [
            {"name": "node1", "state": "Synced", "committed": 40, "pausing": false},
            {"name": "node3", "state": "Donor/Desynced", "committed": 38, "pausing": true},
        ]});
        let members: Vec<RemoteRow> = page["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(member_row)
            .collect();
        let mut read_row = RemoteRow {
            name: "node1".into(),
            source: "10.0.0.1:9104".into(),
            ..RemoteRow::default()
        };
        read_row
            .vars
            .insert("wsrep_local_recv_queue".into(), "3".into());
        let failed = RemoteRow {
            source: "10.0.0.2:9104".into(),
            error: Some("connection refused".into()),
            ..RemoteRow::default()
        };
        let text = format_remote_table(&[read_row, failed, members[1].clone()]);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("node   read from"), "{text}");
        assert!(
            lines[1].contains("10.0.0.1:9104") && lines[1].contains(" 3 "),
            "{text}"
        );
        assert!(lines[2].contains("unreachable"), "{text}");
        assert!(
            lines[3].contains("Donor/Desynced") && lines[3].contains("38"),
            "{text}"
        );
        assert!(
            lines[3].contains("node3  "),
            "the pausing member names itself: {text}"
        );
        assert_eq!(lines[4], "10.0.0.2:9104: connection refused");
        assert_eq!(shown(12.0), "12");
        assert_eq!(shown(0.25), "0.25");
    }
}
