//! Reading a node's monitoring endpoint (`metrics.listen_addr`): its Prometheus metrics and
//! its status page's JSON, for `trireme status` and for the tests. An endpoint of a node with
//! `socket.ssl` on speaks TLS only and wants a client certificate from the cluster's CA:
//! [`Reader::tls`] presents one.

use std::time::Duration;

use anyhow::{anyhow, Context, Result};

/// How long one request to an endpoint may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Reads endpoints, in clear or over TLS.
pub struct Reader {
    agent: ureq::Agent,
    scheme: &'static str,
}

impl Reader {
    /// A reader of plain HTTP endpoints.
    pub fn plain() -> Reader {
        Reader {
            agent: ureq::AgentBuilder::new().timeout(REQUEST_TIMEOUT).build(),
            scheme: "http",
        }
    }

    /// A reader of TLS endpoints that presents `context`'s certificate and checks the
    /// node's against its CA (host names are not checked, as between nodes).
    pub fn tls(context: &tls::TlsContext) -> Reader {
        Reader {
            agent: ureq::AgentBuilder::new()
                .timeout(REQUEST_TIMEOUT)
                .tls_config(context.client_config())
                .build(),
            scheme: "https",
        }
    }

    /// The body of `{address}{path}`, which must answer 200.
    pub fn get(&self, address: &str, path: &str) -> Result<String> {
        let url = format!("{}://{address}{path}", self.scheme);
        let response = self
            .agent
            .get(&url)
            .call()
            // ureq's error names the URL.
            .map_err(anyhow::Error::from)?;
        response
            .into_string()
            .with_context(|| format!("GET {url}: reading the body"))
    }

    /// Scrapes the node's `/metrics`.
    pub fn scrape(&self, address: &str) -> Result<Scrape> {
        let text = self.get(address, "/metrics")?;
        let lines = text.lines().map(|line| Ok(line.to_owned()));
        let parsed = prometheus_parse::Scrape::parse(lines)
            .with_context(|| format!("{address}/metrics is not Prometheus text"))?;
        Ok(Scrape {
            samples: parsed.samples,
        })
    }

    /// The node's status page data (`/status.json`).
    pub fn status_json(&self, address: &str) -> Result<serde_json::Value> {
        let text = self.get(address, "/status.json")?;
        serde_json::from_str(&text).map_err(|e| anyhow!("{address}/status.json: {e}"))
    }
}

/// Scrapes a plain HTTP endpoint's `/metrics`.
pub fn scrape(address: &str) -> Result<Scrape> {
    Reader::plain().scrape(address)
}

/// A plain HTTP endpoint's `/status.json`.
pub fn status_json(address: &str) -> Result<serde_json::Value> {
    Reader::plain().status_json(address)
}

/// One scrape of `/metrics`.
pub struct Scrape {
    samples: Vec<prometheus_parse::Sample>,
}

fn number(value: &prometheus_parse::Value) -> Option<f64> {
    match value {
        prometheus_parse::Value::Counter(n)
        | prometheus_parse::Value::Gauge(n)
        | prometheus_parse::Value::Untyped(n) => Some(*n),
        _ => None,
    }
}

impl Scrape {
    /// The value of the unlabelled series `name`.
    pub fn value(&self, name: &str) -> Option<f64> {
        self.samples
            .iter()
            .find(|s| s.metric == name && s.labels.is_empty())
            .and_then(|s| number(&s.value))
    }

    /// The value of series `name` whose `label` is `label_value`.
    pub fn labelled(&self, name: &str, label: &str, label_value: &str) -> Option<f64> {
        self.samples
            .iter()
            .find(|s| s.metric == name && s.labels.get(label) == Some(label_value))
            .and_then(|s| number(&s.value))
    }

    /// The names of every series, once each.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.samples.iter().map(|s| s.metric.clone()).collect();
        names.sort();
        names.dedup();
        names
    }
}
