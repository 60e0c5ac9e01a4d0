//! The HTTP listener: one thread running a single-threaded tokio runtime, so that a slow or
//! hostile scraper costs a task, never a thread of the database server.

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus::proto::MetricFamily;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, Semaphore};

use crate::error::MetricsError;
use crate::families::{encode, TEXT_CONTENT_TYPE};

/// Connections served at once; more are closed at once (a scraper needs one, a page two).
pub const MAX_CONNECTIONS: usize = 32;
/// How long a client may take to send its request's headers.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a TLS handshake may take.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one connection may stay open, keep-alive included.
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(60);
const _: () = assert!(HEADER_READ_TIMEOUT.as_secs() < CONNECTION_LIFETIME.as_secs());
const _: () = assert!(HANDSHAKE_TIMEOUT.as_secs() < CONNECTION_LIFETIME.as_secs());
/// How often the source is asked to take a sample for the page's charts.
pub const SAMPLE_PERIOD: Duration = Duration::from_secs(1);
/// Pause after a failed accept (out of file descriptors), so the loop does not spin.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// Where the served values come from: read at each request, on the listener's thread.
pub trait Source: Send + Sync + 'static {
    /// Every metric family, for `/metrics`.
    fn metrics(&self) -> Vec<MetricFamily>;
    /// The status page's data, for `/status.json`.
    fn status_json(&self) -> String;
    /// Takes one sample of what the page charts; called every [`SAMPLE_PERIOD`].
    fn sample(&self);
    /// Called first on the listener's thread, before it serves: a node lowers the thread's
    /// priority there, as it does for its other threads.
    fn serving_thread_started(&self) {}
}

/// A running endpoint. Dropping it stops the listener and joins its thread.
pub struct MetricsServer {
    address: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Binds `address` (an error here is the node's to report: the option names a port in
    /// use, or an address this host does not have) and serves from a thread of its own.
    /// With `tls`, every connection is TLS with the node's certificate, and the client
    /// must present one signed by the node's CA, as the node's peers do.
    pub fn start(
        address: SocketAddr,
        tls: Option<Arc<tls::TlsContext>>,
        source: Arc<dyn Source>,
    ) -> Result<MetricsServer, MetricsError> {
        let bind_error = |error| MetricsError::Bind { address, error };
        let listener = std::net::TcpListener::bind(address).map_err(bind_error)?;
        listener.set_nonblocking(true).map_err(bind_error)?;
        let bound = listener.local_addr().map_err(bind_error)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(MetricsError::Runtime)?;
        let (stop, stopped) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("trireme-metrics".into())
            .spawn(move || {
                source.serving_thread_started();
                runtime.block_on(serve(listener, tls, source, stopped))
            })
            .map_err(MetricsError::Runtime)?;
        tracing::info!(address = %bound, "metrics endpoint listening");
        Ok(MetricsServer {
            address: bound,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The address it listens on (the port the system chose, for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.address
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn serve(
    listener: std::net::TcpListener,
    tls: Option<Arc<tls::TlsContext>>,
    source: Arc<dyn Source>,
    mut stopped: oneshot::Receiver<()>,
) {
    let listener = match TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(error) => {
            tracing::error!(%error, "metrics endpoint: the listener could not start");
            return;
        }
    };
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let sampled = Arc::clone(&source);
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(SAMPLE_PERIOD);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            sampled.sample();
        }
    });
    loop {
        let accepted = tokio::select! {
            _ = &mut stopped => return,
            accepted = listener.accept() => accepted,
        };
        let (tcp, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "metrics endpoint: accept failed");
                tokio::time::sleep(ACCEPT_RETRY).await;
                continue;
            }
        };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            tracing::debug!(%peer, "metrics endpoint: too many connections, one refused");
            continue;
        };
        let (tls, source) = (tls.clone(), Arc::clone(&source));
        tokio::spawn(async move {
            let _slot = slot;
            let served = connection(tcp, tls, source);
            match tokio::time::timeout(CONNECTION_LIFETIME, served).await {
                Ok(Ok(())) => {}
                Ok(Err(error)) => tracing::debug!(%peer, %error, "metrics connection ended"),
                Err(_) => tracing::debug!(%peer, "metrics connection closed at its lifetime"),
            }
        });
    }
}

async fn connection(
    tcp: TcpStream,
    tls: Option<Arc<tls::TlsContext>>,
    source: Arc<dyn Source>,
) -> Result<(), String> {
    let service = service_fn(move |request: Request<Incoming>| {
        let response = respond(source.as_ref(), &request);
        async move { Ok::<_, hyper::Error>(response) }
    });
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    match tls {
        None => http
            .serve_connection(TokioIo::new(tcp), service)
            .await
            .map_err(|error| error.to_string()),
        Some(tls) => {
            let acceptor = tokio_rustls::TlsAcceptor::from(tls.server_config());
            let stream = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp))
                .await
                .map_err(|_| "TLS handshake timed out".to_owned())?
                .map_err(|error| format!("TLS handshake failed: {error}"))?;
            http.serve_connection(TokioIo::new(stream), service)
                .await
                .map_err(|error| error.to_string())
        }
    }
}

/// The static status page.
const PAGE: &str = include_str!("page.html");

fn respond(source: &dyn Source, request: &Request<Incoming>) -> Response<Full<Bytes>> {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return plain(
            StatusCode::METHOD_NOT_ALLOWED,
            "only GET and HEAD are served\n",
        );
    }
    match request.uri().path() {
        "/metrics" => match encode(&source.metrics()) {
            Ok(text) => with_type(StatusCode::OK, TEXT_CONTENT_TYPE, text),
            Err(error) => plain(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("metrics could not be encoded: {error}\n"),
            ),
        },
        "/status.json" => with_type(StatusCode::OK, "application/json", source.status_json()),
        "/" => with_type(StatusCode::OK, "text/html; charset=utf-8", PAGE.to_owned()),
        _ => plain(
            StatusCode::NOT_FOUND,
            "not found: this endpoint serves /, /status.json and /metrics\n",
        ),
    }
}

fn plain(status: StatusCode, text: &str) -> Response<Full<Bytes>> {
    with_type(status, "text/plain; charset=utf-8", text.to_owned())
}

fn with_type(
    status: StatusCode,
    content_type: &'static str,
    body: String,
) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}
