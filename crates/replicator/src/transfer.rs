//! State transfer between a donor and its joiner, on the replicator's side: the donor's
//! choice between IST and SST, the stream it sends to the joiner's `ist.recv_addr`
//! ([`crate::ist`]), and the joiner's receiver, which queues what it receives for the
//! appliers in order.

use std::io::{BufReader, BufWriter, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base::{NodeState, Seqno, Uuid};
use cert::Certifier;
use group::StateRequest;
use writeset::WriteSet;

use crate::applier::RecvEvent;
use crate::ist::{self, Action, ActionKind, Header, IstError, Outcome, RecordReader, FAILED_CERT};
use crate::joining::Joining;
use crate::shared::{lock, monitors_continue_at, Shared};
use crate::{view_record, LogLevel};

/// Receive-queue length above which the IST receiver waits for the appliers: a long IST
/// must not pile up in memory faster than the server applies it.
const IST_QUEUE_LIMIT: usize = 4096;
/// How long a donor may take to connect, and a joiner waits for a stalled stream.
const STREAM_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a connection to the IST port may take for TLS and the stream's header. Short,
/// so that a connection that never sends does not hold the port (streams are received one
/// at a time) for the whole [`STREAM_TIMEOUT`].
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the receiver waits for the server to report its snapshot before the records.
const SNAPSHOT_WAIT: Duration = Duration::from_secs(3600);
/// Records a donor sends between two moves of its cache pin.
const PIN_STEP: i64 = 1024;
/// Fault injection for tests: a donor whose environment has this variable set to N breaks
/// off its first IST stream after N records, as a donor that dies mid-stream would.
const FAULT_CUT_IST_AFTER: &str = "TRIREME_FAULT_CUT_IST_AFTER";
/// Whether the injected cut already happened in this process (it happens once).
static FAULT_CUT_DONE: AtomicBool = AtomicBool::new(false);
/// Refusals in a row after which a joiner that can only take IST stops asking: no member
/// holds its gap any more.
pub(crate) const REFUSALS_BEFORE_GIVING_UP: u32 = 3;
/// How long a joiner that asked for IST only waits for a donor's stream to begin before it
/// asks again (the chosen donor may have died before it could connect).
pub(crate) const IST_START_TIMEOUT: Duration = Duration::from_secs(30);

/// The injected cut for this stream, if any (see [`FAULT_CUT_IST_AFTER`]).
fn injected_cut() -> Option<u64> {
    let after = std::env::var(FAULT_CUT_IST_AFTER).ok()?.parse().ok()?;
    (!FAULT_CUT_DONE.swap(true, Ordering::SeqCst)).then_some(after)
}

/// How a donor serves one request.
pub(crate) enum DonorPlan {
    /// Stream `first..=last` from the cache; with a server request, the server only
    /// confirms the joiner's own position (`bypass`).
    Ist { first: Seqno, pin: u64 },
    /// The server sends a snapshot; `reason` says why IST was not possible.
    Sst { reason: String },
    /// An IST-only request this node cannot serve.
    Refuse { reason: String },
}

/// Decides, on the dispatcher (so the cache cannot be purged between the decision and the
/// pin), how to serve `request` with the order at `position`.
pub(crate) fn plan_donation(
    shared: &Shared,
    cluster: Uuid,
    request: &StateRequest,
    position: Seqno,
) -> DonorPlan {
    let ist_only = request.sst_request.is_empty();
    let not_possible = |reason: String| {
        if ist_only {
            DonorPlan::Refuse { reason }
        } else {
            DonorPlan::Sst { reason }
        }
    };
    if !request.ist_from.is_defined() {
        return not_possible("the joiner has no position of this cluster's history".into());
    }
    if request.ist_from > position {
        return not_possible(format!(
            "the joiner is at {} but this donor only at {position}",
            request.ist_from
        ));
    }
    let first = request.ist_from.next();
    let mut cache = lock(&shared.cache);
    if !cache.holds(cluster, first, position) {
        return not_possible(format!(
            "seqno {first} is missing on this donor: its gcache holds {} and the joiner needs \
             {first}..={position}",
            cache.describe()
        ));
    }
    let pin = cache.pin(first);
    DonorPlan::Ist { first, pin }
}

/// The donor's side of one transfer: sends the header, then the records for IST. Runs on
/// its own thread.
pub(crate) fn send_stream(
    shared: &Arc<Shared>,
    address: &str,
    header: Header,
    pin: Option<u64>,
) -> Result<u64, String> {
    let result = send_stream_inner(shared, address, &header, pin);
    if let Some(pin) = pin {
        lock(&shared.cache).unpin(pin);
    }
    result
}

fn send_stream_inner(
    shared: &Arc<Shared>,
    address: &str,
    header: &Header,
    pin: Option<u64>,
) -> Result<u64, String> {
    let target = address
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {address}: {e}"))?
        .next()
        .ok_or_else(|| format!("{address} resolves to nothing"))?;
    let tcp = TcpStream::connect_timeout(&target, STREAM_TIMEOUT)
        .map_err(|e| format!("cannot connect to {address}: {e}"))?;
    tcp.set_write_timeout(Some(STREAM_TIMEOUT))
        .and_then(|()| tcp.set_read_timeout(Some(STREAM_TIMEOUT)))
        .map_err(|e| e.to_string())?;
    let _ = tcp.set_nodelay(true);
    let stream = match &shared.settings.tls {
        Some(context) => context
            .connect(tcp, address)
            .map_err(|e| format!("IST to {address}: {}", e.cause))?,
        None => tls::Stream::Plain(tcp),
    };
    let mut out = BufWriter::with_capacity(1 << 20, stream);
    ist::write_header(&mut out, header).map_err(|e| format!("sending the header: {e}"))?;
    if header.outcome != Outcome::Ist {
        ist::write_end(&mut out, 0).map_err(|e| e.to_string())?;
        return Ok(0);
    }
    let mut sent = 0u64;
    let mut seqno = header.first;
    let cut_after = injected_cut();
    while seqno <= header.last {
        if cut_after == Some(sent) {
            let _ = out.flush();
            return Err(format!(
                "stream cut after {sent} records ({FAULT_CUT_IST_AFTER} is set)"
            ));
        }
        let action = lock(&shared.cache)
            .read(seqno)
            .map_err(|e| format!("reading seqno {seqno} from the gcache: {e}"))?;
        ist::write_record(&mut out, &action).map_err(|e| format!("sending seqno {seqno}: {e}"))?;
        sent += 1;
        if let Some(pin) = pin {
            if seqno.0 % PIN_STEP == 0 {
                lock(&shared.cache).advance_pin(pin, seqno);
            }
        }
        seqno = seqno.next();
    }
    ist::write_end(&mut out, sent).map_err(|e| format!("sending the end: {e}"))?;
    Ok(sent)
}

/// Progress of the joiner's current transfer.
#[derive(Debug)]
pub(crate) struct TransferProgress {
    /// The donor's certification index and its position, once the header arrived.
    pub(crate) index: Option<(Seqno, Certifier)>,
    /// Everything up to here is queued for the appliers (or was in the snapshot).
    pub(crate) queued_upto: Seqno,
    /// The stream ended and was verified.
    pub(crate) done: bool,
    /// The stream failed (or the donor refused); the joiner asks again from `queued_upto`.
    pub(crate) failed: Option<String>,
    /// The donor sent (or will send) an SST; the server's snapshot brings the data.
    pub(crate) by_sst: bool,
    /// Donors in a row that could not serve the gap (IST-only requests).
    pub(crate) refusals: u32,
}

impl Default for TransferProgress {
    fn default() -> Self {
        TransferProgress {
            index: None,
            queued_upto: Seqno::UNDEFINED,
            done: false,
            failed: None,
            by_sst: false,
            refusals: 0,
        }
    }
}

/// Accepts donors' streams on `ist.recv_addr` until the node closes or connects again.
pub(crate) fn receive_transfers(shared: Arc<Shared>, listener: TcpListener, connection: u64) {
    listener
        .set_nonblocking(true)
        .expect("a listener can be made nonblocking");
    loop {
        {
            let inner = lock(&shared.inner);
            if inner.closing || !inner.connected || inner.connection != connection {
                return;
            }
        }
        match listener.accept() {
            Ok((tcp, peer)) => {
                let peer = peer.to_string();
                match secure(&shared, tcp, &peer) {
                    Ok(stream) => receive_one(&shared, stream, &peer),
                    Err(reason) => {
                        let message =
                            format!("refused a state transfer connection from {peer}: {reason}");
                        log(&shared, LogLevel::Warning, &message);
                    }
                }
                shared.changed.notify_all();
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// TLS when the node has it, as for group traffic (Galera runs IST under `socket.ssl_*`);
/// without it, a peer that starts TLS is told apart from garbage.
fn secure(shared: &Shared, tcp: TcpStream, peer: &str) -> Result<tls::Stream, String> {
    tcp.set_nonblocking(false)
        .and_then(|()| tcp.set_read_timeout(Some(HEADER_TIMEOUT)))
        .and_then(|()| tcp.set_write_timeout(Some(HEADER_TIMEOUT)))
        .map_err(|e| e.to_string())?;
    if let Some(context) = &shared.settings.tls {
        return context.accept(tcp, peer).map_err(|e| e.cause);
    }
    let mut first = [0u8; 1];
    match tcp.peek(&mut first) {
        Ok(1) if tls::looks_like_tls(first[0]) => Err(
            "the donor speaks TLS, and this node has no socket.ssl_key and socket.ssl_cert"
                .to_owned(),
        ),
        _ => Ok(tls::Stream::Plain(tcp)),
    }
}

fn log(shared: &Shared, level: LogLevel, message: &str) {
    shared.app.log(level, message);
}

fn fail(shared: &Shared, reason: String) {
    let mut inner = lock(&shared.inner);
    if let Some(joining) = inner.joining.as_mut() {
        joining.transfer.failed = Some(reason);
    }
}

fn receive_one(shared: &Arc<Shared>, stream: tls::Stream, peer: &str) {
    let mut input = BufReader::with_capacity(1 << 20, stream);
    let header = match ist::read_header(&mut input) {
        Ok(header) => {
            // A donor that sent its header may pause for as long as its cache reads take.
            let _ = input.get_ref().tcp().set_read_timeout(Some(STREAM_TIMEOUT));
            header
        }
        Err(error) => {
            let message = format!("refused a state transfer stream from {peer}: {error}");
            log(shared, LogLevel::Warning, &message);
            fail(shared, message);
            return;
        }
    };
    {
        let inner = lock(&shared.inner);
        if inner.joining.is_none() || inner.cluster != header.cluster {
            drop(inner);
            let message = format!(
                "ignored a state transfer stream from {peer} for history {}: not joining it",
                header.cluster
            );
            log(shared, LogLevel::Warning, &message);
            return;
        }
    }
    if header.outcome == Outcome::Refused {
        let message = format!("donor {peer} cannot serve IST: {}", header.reason);
        log(shared, LogLevel::Warning, &message);
        if let Some(joining) = lock(&shared.inner).joining.as_mut() {
            joining.transfer.refusals += 1;
        }
        fail(shared, message);
        return;
    }
    let cert = match Certifier::decode(&header.index) {
        Ok(cert) => cert,
        Err(error) => {
            let message = format!("the certification index from {peer} does not decode: {error}");
            log(shared, LogLevel::Warning, &message);
            fail(shared, message);
            return;
        }
    };
    if header.outcome == Outcome::Sst {
        if !header.reason.is_empty() {
            // A note: the donor warns when a joiner that had a position could not get IST.
            let message = format!("state transfer by SST from {peer}: {}", header.reason);
            log(shared, LogLevel::Info, &message);
        }
        let mut inner = lock(&shared.inner);
        if let Some(joining) = inner.joining.as_mut() {
            joining.transfer.index = Some((header.last, cert));
            joining.transfer.by_sst = true;
            joining.transfer.done = true;
        }
        return;
    }
    // Galera's words: DBAs' scripts and MariaDB's tests look for "Receiving IST".
    let message = format!(
        "Receiving IST: {} write-sets, seqnos {}-{} from {peer}",
        header.last.0 - header.first.0 + 1,
        header.first,
        header.last
    );
    log(shared, LogLevel::Info, &message);
    {
        let mut inner = lock(&shared.inner);
        if let Some(joining) = inner.joining.as_mut() {
            joining.transfer.index = Some((header.last, cert));
            joining.transfer.refusals = 0;
        }
    }
    let started = Instant::now();
    match receive_records(shared, &mut input, &header) {
        Ok(count) => {
            let seconds = started.elapsed().as_secs_f64();
            let message = format!(
                "IST of seqnos {}..={} from {peer} complete: {count} write-sets in {seconds:.1} s \
                 ({:.0}/s)",
                header.first,
                header.last,
                count as f64 / seconds.max(1e-3)
            );
            log(shared, LogLevel::Info, &message);
            let mut inner = lock(&shared.inner);
            if let Some(joining) = inner.joining.as_mut() {
                joining.transfer.done = true;
            }
        }
        Err(error) => {
            let message = format!("IST from {peer} failed: {error}");
            log(shared, LogLevel::Warning, &message);
            fail(shared, message);
        }
    }
}

/// Waits until the server reports its snapshot (for IST, its own position), then queues
/// every record after it; returns the number of records queued.
fn receive_records(
    shared: &Arc<Shared>,
    input: &mut impl std::io::Read,
    header: &Header,
) -> Result<u64, IstError> {
    let position = wait_for_snapshot(shared)?;
    if position.0 < header.first.0 - 1 {
        return Err(IstError::BadRecord {
            seqno: header.first,
            what: "the stream starts after the joiner's position: seqnos in between are missing",
        });
    }
    monitors_continue_at(shared, position);
    let mut reader = RecordReader::new(header);
    let mut queued = 0u64;
    // This node's identity, which places it in the views the stream carries (all ordered
    // before its request, so none names an identity it takes later).
    let own = lock(&shared.inner).own;
    while let Some(action) = reader.next(input)? {
        if action.seqno <= position {
            continue;
        }
        let cluster = header.cluster;
        // Decoded before it is cached: a record that does not decode is never kept.
        let event = event_of(&action, cluster, own)?;
        let recorded = lock(&shared.cache).record(
            cluster,
            action.seqno,
            action.kind,
            action.depends_on,
            &action.payload,
        );
        if let Err(error) = recorded {
            let message = format!("cannot cache IST seqno {}: {error}", action.seqno);
            log(shared, LogLevel::Warning, &message);
        }
        let mut inner = lock(&shared.inner);
        while inner.queue.len() >= IST_QUEUE_LIMIT && !inner.closing && inner.connected {
            let (guard, _) = shared
                .changed
                .wait_timeout(inner, Duration::from_millis(100))
                .unwrap_or_else(|p| p.into_inner());
            inner = guard;
        }
        if inner.closing || !inner.connected {
            return Err(IstError::Truncated {
                after: reader.received_upto(),
                reason: "the node is closing".into(),
            });
        }
        let member_view = matches!(&event, RecvEvent::View { view, .. } if view.my_index >= 0);
        inner.queue.push_back(event);
        if let Some(joining) = inner.joining.as_mut() {
            joining.transfer.queued_upto = action.seqno;
            joining.member_view_queued |= member_view;
        }
        queued += 1;
        drop(inner);
        shared.changed.notify_all();
    }
    Ok(queued)
}

fn wait_for_snapshot(shared: &Shared) -> Result<Seqno, IstError> {
    let deadline = Instant::now() + SNAPSHOT_WAIT;
    let mut inner = lock(&shared.inner);
    loop {
        let Some(joining) = inner.joining.as_ref() else {
            return Err(IstError::Truncated {
                after: Seqno::UNDEFINED,
                reason: "the node is no longer joining".into(),
            });
        };
        if joining.received.is_some() {
            return Ok(joining.in_place_upto());
        }
        if inner.closing || !inner.connected || Instant::now() >= deadline {
            return Err(IstError::Truncated {
                after: Seqno::UNDEFINED,
                reason: "the server never reported its snapshot".into(),
            });
        }
        let (guard, _) = shared
            .changed
            .wait_timeout(inner, Duration::from_millis(100))
            .unwrap_or_else(|p| p.into_inner());
        inner = guard;
    }
}

/// The applier event for one received action of `cluster`, on the node whose identity is
/// `own`.
fn event_of(action: &Action, cluster: Uuid, own: Uuid) -> Result<RecvEvent, IstError> {
    match action.kind {
        ActionKind::Skip => Ok(RecvEvent::Skip {
            seqno: action.seqno,
        }),
        ActionKind::View => {
            let view = view_record::decode(cluster, action.seqno, &action.payload, own).map_err(
                |error| IstError::BadView {
                    seqno: action.seqno,
                    error,
                },
            )?;
            Ok(RecvEvent::View {
                view,
                ordered: true,
            })
        }
        ActionKind::WriteSet => {
            let write_set = WriteSet::decode(&action.payload).map_err(|_| IstError::BadRecord {
                seqno: action.seqno,
                what: "the write-set does not decode",
            })?;
            let failed = action.depends_on == FAILED_CERT;
            let depends_on = if failed {
                action.seqno.prev()
            } else {
                Seqno(action.depends_on)
            };
            Ok(RecvEvent::Apply {
                seqno: action.seqno,
                depends_on,
                write_set,
                failed,
            })
        }
    }
}

/// Sends this node's state request to the group.
pub(crate) fn send_state_request(shared: &Shared, sst_request: Vec<u8>, ist_from: Seqno) {
    let inner = lock(&shared.inner);
    let request = StateRequest {
        joiner: 0,
        request_id: 0,
        donor_names: inner.donor_names.clone(),
        sst_request,
        ist_from,
        ist_address: inner
            .reachable
            .as_ref()
            .map(|reachable| reachable.ist.clone())
            .unwrap_or_default(),
    };
    if let Some(runner) = inner.runner.as_ref() {
        let _ = runner.request_state(request);
    }
}

/// Marks the node a joiner again after it fell out of the order (evicted, then readmitted
/// as a new member): everything up to `position` is in this server already, the rest comes
/// by IST.
pub(crate) fn start_rejoin(shared: &Shared, cluster: Uuid, join_seqno: Seqno, position: Seqno) {
    {
        let mut inner = lock(&shared.inner);
        inner.shift(NodeState::Joiner, &*shared.app);
        let mut joining = Joining::new(join_seqno);
        joining.continue_own_state(cluster, position);
        inner.joining = Some(joining);
    }
    let message = format!(
        "this node missed seqnos {}..={} while it was out of the primary component; \
         catching up by IST",
        position.next(),
        join_seqno.prev()
    );
    log(shared, LogLevel::Info, &message);
    send_state_request(shared, Vec::new(), position);
    if let Some(joining) = lock(&shared.inner).joining.as_mut() {
        joining.ist_requested_at = Some(Instant::now());
    }
}
