//! State transfers in the simulator, with the engine deciding every step: the joiner's
//! applier that asks and waits, the donor's stream in the real IST wire format (now and then
//! cut or damaged on the way, or cut short by the donor's crash), the joiner reading it
//! once its snapshot is in place, and the donor's server sending a snapshot of its database
//! (taken under a pause now and then, as rsync takes one) or only confirming the joiner's
//! position for IST.

use base::{Gtid, Seqno};
use engine::ist::{self, Header, Outcome, RecordReader};
use engine::{OutgoingTransfer, RequestWait, SnapshotWait, StreamNext};
use rand::Rng;

use crate::kv::KvDb;
use crate::node::{Donation, IncomingStream, Running, SimNode};
use crate::{Event, Simulation};

/// How long a snapshot takes to send, microseconds, plus a little per row.
const SNAPSHOT_US: u64 = 5_000;
/// The part of streams the network cuts or damages on the way.
const STREAM_DAMAGE_PROBABILITY: f64 = 0.05;
/// The part of streams whose donor crashes before they arrive (in the fault phase).
const DONOR_CRASH_PROBABILITY: f64 = 0.05;

impl Simulation {
    /// A donor's engine chose to send `transfer`: the stream leaves now, whole, unless the
    /// network cuts or damages it, and arrives after a delay (lost if the donor crashes
    /// first: the joiner then sees it cut).
    pub(crate) fn send_transfer(
        &mut self,
        slot: usize,
        transfer: OutgoingTransfer,
    ) -> Result<(), String> {
        let process = self.nodes[slot].process();
        let mut bytes = Vec::new();
        ist::write_header(&mut bytes, &transfer.header).expect("writes to memory");
        let mut sent = 0;
        if transfer.header.outcome == Outcome::Ist {
            let mut seqno = transfer.header.first;
            while seqno <= transfer.header.last {
                let action = process
                    .cache
                    .read(seqno)
                    .map_err(|e| format!("node {slot}: a pinned seqno cannot be read: {e}"))?;
                ist::write_record(&mut bytes, &action).expect("writes to memory");
                sent += 1;
                seqno = seqno.next();
            }
        }
        ist::write_end(&mut bytes, sent).expect("writes to memory");
        if let Some(pin) = transfer.pin {
            process.cache.unpin(pin);
        }
        let Some(to) = SimNode::slot_of(&transfer.address, self.nodes.len()) else {
            return Err(format!(
                "node {slot}: a stream to an unknown address {}",
                transfer.address
            ));
        };
        if self.rng.gen_bool(STREAM_DAMAGE_PROBABILITY) {
            bytes = self.damage_stream(bytes);
        }
        let delay = self.rng.gen_range(1_000..20_000) + sent * 20;
        self.schedule(
            delay,
            Event::Stream {
                to,
                from: slot,
                bytes,
            },
        );
        if self.fault_phase && self.options.faults && self.rng.gen_bool(DONOR_CRASH_PROBABILITY) {
            let down_us = self.rng.gen_range(100_000..1_000_000);
            let fault = crate::faults::Fault::CrashDonor { slot, down_us };
            self.schedule(delay / 2, Event::Fault(fault));
        }
        Ok(())
    }

    /// Cuts a stream short or flips one of its bytes.
    fn damage_stream(&mut self, mut bytes: Vec<u8>) -> Vec<u8> {
        let at = self.rng.gen_range(0..bytes.len());
        if self.rng.gen_bool(0.5) {
            base::mark!("sim.stream_cut_on_the_way");
            bytes.truncate(at);
        } else {
            base::mark!("sim.stream_damaged_on_the_way");
            bytes[at] ^= 1 << self.rng.gen_range(0..8);
        }
        bytes
    }

    /// A stream reaches `to`'s IST port. A donor that crashed meanwhile had only sent part.
    pub(crate) fn on_stream(
        &mut self,
        to: usize,
        from: usize,
        mut bytes: Vec<u8>,
    ) -> Result<(), String> {
        if !self.nodes[to].alive() {
            return Ok(());
        }
        if !self.nodes[from].alive() && !bytes.is_empty() {
            base::mark!("sim.donor_died_during_its_stream");
            let at = self.rng.gen_range(0..bytes.len());
            bytes.truncate(at);
        }
        let peer = SimNode::address(from);
        let mut input = bytes.as_slice();
        if std::env::var_os("SIM_TRACE").is_some() {
            let header = ist::read_header(&mut bytes.as_slice());
            let summary = header.map(|h| (h.outcome, h.first, h.last));
            eprintln!("{} node {to} stream from {from}: {summary:?}", self.now_us);
        }
        let process = self.nodes[to].process();
        let header = match ist::read_header(&mut input) {
            Ok(header) => header,
            Err(error) => {
                self.report.refused_streams += 1;
                let message = format!("refused a state transfer stream from {peer}: {error}");
                process.engine.stream_failed(message);
                return self.pump(to);
            }
        };
        if process.engine.stream_header(&peer, &header) == StreamNext::Records {
            process.incoming = Some(IncomingStream {
                peer,
                header,
                rest: input.to_vec(),
            });
        }
        self.pump(to)
    }

    /// Reads an IST stream once the server's snapshot is in place, record by record into
    /// the engine.
    pub(crate) fn advance_incoming(&mut self, slot: usize) -> Result<bool, String> {
        let process = self.nodes[slot].process();
        if process.incoming.is_none() {
            return Ok(false);
        }
        let position = match process.engine.snapshot_position() {
            SnapshotWait::Wait => return Ok(false),
            SnapshotWait::Gone => {
                process.incoming = None;
                return Ok(true);
            }
            SnapshotWait::Ready(position) => position,
        };
        let IncomingStream { peer, header, rest } = process.incoming.take().expect("checked");
        match read_records(process, &header, &rest, position) {
            Ok(count) => {
                base::mark!("sim.ist_received");
                process.engine.ist_finished(&peer, &header, count, 0.0);
            }
            Err(error) => {
                self.report.refused_streams += 1;
                process
                    .engine
                    .stream_failed(format!("IST from {peer} failed: {error}"));
            }
        }
        Ok(true)
    }

    /// The applier that sent the state request waits until the snapshot is in place.
    pub(crate) fn advance_state_request(&mut self, slot: usize, id: u64) -> Result<bool, String> {
        let process = self.nodes[slot].process();
        if process.engine.poll_state_request() == RequestWait::Wait {
            return Ok(false);
        }
        process.running.remove(&id);
        process.engine.task_done(true);
        Ok(true)
    }

    /// A donor's applier: for a snapshot, once everything up to the request's position is
    /// committed, the node goes DONOR and the server's sending starts beside the appliers
    /// (for IST it only confirms the joiner's own position).
    pub(crate) fn advance_donation(&mut self, slot: usize, id: u64) -> Result<bool, String> {
        let under_pause = self.rng.gen_bool(0.5);
        let process = self.nodes[slot].process();
        let Some(Running::Donate {
            request,
            wait_for,
            bypass,
        }) = process.running.get(&id)
        else {
            unreachable!("a donation");
        };
        if bypass.is_none() && process.committed() < *wait_for {
            return Ok(false);
        }
        let donation = Donation {
            joiner_raft_id: request.joiner,
            bypass: *bypass,
            under_pause: under_pause && bypass.is_none(),
            paused_at: None,
        };
        if process.engine.donation_starts(request) {
            process.donations.push(donation);
        }
        process.running.remove(&id);
        process.engine.task_done(true);
        Ok(true)
    }

    /// The server's snapshots on their way: one taken under a pause (as rsync takes it)
    /// waits until everything up to the pause point is committed.
    pub(crate) fn advance_donations(&mut self, slot: usize) -> Result<bool, String> {
        let mut moved = false;
        let count = self.nodes[slot].process().donations.len();
        for index in (0..count).rev() {
            let process = self.nodes[slot].process();
            let mut donation = process.donations[index];
            if donation.under_pause {
                match donation.paused_at {
                    None if process.engine.pause_point().is_some() => continue,
                    None => {
                        let point = process.engine.pause(process.committed());
                        process.donations[index].paused_at = Some(point);
                        moved = true;
                        continue;
                    }
                    Some(point) if !process.engine.pause_reached(point, process.committed()) => {
                        continue
                    }
                    Some(_) => {}
                }
            }
            donation = process.donations.remove(index);
            let state = self.send_snapshot(
                slot,
                donation.joiner_raft_id,
                donation.bypass,
                donation.paused_at,
            )?;
            let process = self.nodes[slot].process();
            if donation.paused_at.is_some() {
                process.engine.resume();
            }
            let incarnation = process.incarnation;
            let took = SNAPSHOT_US + self.nodes[slot].disk.db.rows.len() as u64 * 10;
            self.schedule(
                took,
                Event::SnapshotSent {
                    slot,
                    incarnation,
                    state,
                    rcode: 0,
                },
            );
            moved = true;
        }
        Ok(moved)
    }

    /// Sends the joiner (by its Raft id) a snapshot of this node's database, or for IST the
    /// joiner's own position; returns the state sent.
    fn send_snapshot(
        &mut self,
        slot: usize,
        joiner_raft_id: u64,
        bypass: Option<Gtid>,
        paused_at: Option<Seqno>,
    ) -> Result<Gtid, String> {
        let Some(to) = self.slot_of_member(joiner_raft_id) else {
            // The joiner is gone; its request was still served by the order.
            let db = &self.nodes[slot].disk.db;
            return Ok(bypass.unwrap_or(Gtid {
                cluster: db.history,
                seqno: db.committed,
            }));
        };
        let (state, db) = match bypass {
            Some(position) => (position, None),
            None => {
                let db = &self.nodes[slot].disk.db;
                let mut snapshot = db.clone();
                snapshot.roll_back_uncommitted();
                if let Some(point) = paused_at {
                    // Under a pause the data is as of the point: what committed after it can
                    // only be failures, which change nothing, and the snapshot says the point.
                    if db.last_written > point || db.committed < point {
                        return Err(format!(
                            "node {slot}: paused at {point:?} but its database was last written \
                             at {:?} and stands at {:?}: the snapshot would not match its \
                             position",
                            db.last_written, db.committed
                        ));
                    }
                    base::mark!("sim.snapshot_taken_under_a_pause");
                    snapshot.committed = point;
                }
                let state = Gtid {
                    cluster: snapshot.history,
                    seqno: snapshot.committed,
                };
                (state, Some(Box::new(snapshot)))
            }
        };
        let delay = SNAPSHOT_US + self.rng.gen_range(0..5_000);
        self.schedule(
            delay,
            Event::Snapshot {
                to,
                joiner_raft_id,
                state,
                db,
            },
        );
        Ok(state)
    }

    /// The slot whose running process is the group member `raft_id`.
    fn slot_of_member(&self, raft_id: u64) -> Option<usize> {
        self.nodes.iter().position(|n| {
            n.process
                .as_ref()
                .is_some_and(|p| p.group.me().raft_id == raft_id)
        })
    }

    /// A snapshot (or, for IST, the joiner's own position) reaches the joiner's server,
    /// which installs it and reports it, if the process that asked is still the one
    /// running.
    pub(crate) fn on_snapshot(
        &mut self,
        to: usize,
        joiner_raft_id: u64,
        state: Gtid,
        db: Option<Box<KvDb>>,
    ) -> Result<(), String> {
        let node = &mut self.nodes[to];
        let Some(process) = node.process.as_mut() else {
            return Ok(());
        };
        let waiting = process
            .engine
            .joining()
            .is_some_and(|j| j.received.is_none());
        if process.group.me().raft_id != joiner_raft_id || !waiting {
            return Ok(());
        }
        match db {
            Some(snapshot) => {
                base::mark!("sim.joined_by_snapshot");
                self.report.joins_by_sst += 1;
                node.disk.db = *snapshot;
            }
            None => {
                if node.disk.db.committed != state.seqno || node.disk.db.history != state.cluster {
                    return Err(format!(
                        "node {to}: IST confirms position {state} but its database stands at \
                         {:?}",
                        node.disk.db.committed
                    ));
                }
                self.report.joins_by_ist += 1;
            }
        }
        if std::env::var_os("SIM_TRACE").is_some() {
            eprintln!("{} node {to} snapshot at {state}", self.now_us);
        }
        let process = node.process.as_mut().expect("checked");
        process
            .engine
            .sst_received(state, 0)
            .map_err(|refusal| format!("node {to}: its snapshot was refused: {refusal:?}"))?;
        self.pump(to)
    }

    /// The donor's server finished sending.
    pub(crate) fn on_snapshot_sent(
        &mut self,
        slot: usize,
        incarnation: u64,
        state: Gtid,
        rcode: i32,
    ) -> Result<(), String> {
        let Some(process) = self.nodes[slot].process_of(incarnation) else {
            return Ok(());
        };
        process.engine.sst_sent(state, rcode);
        self.carry_out(slot)?;
        self.pump(slot)
    }
}

/// Hands every record of an IST stream to the engine; the number of records read.
fn read_records(
    process: &mut crate::node::Process,
    header: &Header,
    rest: &[u8],
    position: Seqno,
) -> Result<u64, ist::IstError> {
    process.engine.ist_begins(header, position)?;
    let mut input = rest;
    let mut reader = RecordReader::new(header);
    let mut count = 0;
    while let Some(action) = reader.next(&mut input)? {
        process
            .engine
            .ist_record(header.cluster, action, position)?;
        count += 1;
    }
    Ok(count)
}
