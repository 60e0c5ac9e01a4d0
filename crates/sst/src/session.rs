//! The connections of one transfer: TLS when configured, then on every connection a proof
//! that both ends hold the session secret of the joiner's `ready` address.
//!
//! The joiner makes the secret and prints it in its ready address; its server sends that
//! address to the group as its state transfer request, and the donor the group chose gets
//! it as `--address`. The secret never crosses an SST connection, TLS or not: each side
//! proves it holds it with an HMAC-SHA256 over fresh nonces of both sides, so a recorded
//! exchange proves nothing in another. The joiner proves itself first, so a donor never
//! answers a peer that does not hold the secret, and the joiner refuses every connection
//! that does not prove it.
//!
//! ```text
//! donor                                        joiner
//! [TLS client handshake] ───────────────────► [TLS server: both certificates checked]
//! "TSA" 1 | donor nonce ────────────────────►
//!   ◄──── "TSA" 1 | joiner nonce | HMAC(secret, "joiner" | donor nonce | joiner nonce)
//! HMAC(secret, "donor" | joiner nonce | donor nonce) ───►
//!   ◄──── ACCEPTED, or an Error frame and close
//! frames (Hello, Plan, Data, ...)
//! ```
//!
//! A refusal the other side can read is sent as an [`Frame::Error`], also in plaintext to a
//! peer that connected without the TLS this joiner requires, so that both logs say why.

use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use hmac::{Hmac, Mac};
use sha2::Sha256;
use tls::{Stream, TlsContext, TlsFiles};

use crate::frame::{read_frame, write_frame, Frame};
use crate::{log, SstError};

/// Bytes of the session secret (printed as twice as many hex digits).
pub const SECRET_BYTES: usize = 32;
/// How long each side waits for the other during TLS and the proof of the secret.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);
const MAGIC: [u8; 3] = *b"TSA";
const PROOF_VERSION: u8 = 1;
const NONCE_BYTES: usize = 32;
const PROOF_BYTES: usize = 32;
const GREETING_BYTES: usize = MAGIC.len() + 1 + NONCE_BYTES;
const CHALLENGE_BYTES: usize = GREETING_BYTES + PROOF_BYTES;
/// The joiner's last byte of the exchange when it admits the donor. Not `T`, the first
/// byte of a frame, which a refusal is.
const ACCEPTED: u8 = 0xA5;
/// Each proof names its direction, so one side's proof is never valid as the other's.
const DONOR_LABEL: &[u8] = b"trireme-sst donor";
const JOINER_LABEL: &[u8] = b"trireme-sst joiner";
const SESSION_ID_LABEL: &[u8] = b"trireme-sst session id";
/// How long a refusing joiner waits for the refused peer to read its message and close, so
/// that closing with the peer's bytes unread (a reset) does not destroy the message.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);
/// The most a refusing joiner reads from the refused peer while it waits.
const DRAIN_BYTES: usize = 64 << 10;

/// The session secret: random, printed in the `ready` address, never sent on a connection.
#[derive(Clone)]
pub struct Secret([u8; SECRET_BYTES]);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secret({:016x})", self.session_id())
    }
}

impl Secret {
    /// A new secret from the kernel's random source; there is no weaker fallback.
    pub fn generate() -> Result<Secret, SstError> {
        random_bytes().map(Secret)
    }

    /// The secret as it appears in the ready address.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Reads [`Secret::to_hex`]'s form; `None` unless it is exactly that.
    pub fn from_hex(text: &str) -> Option<Secret> {
        if text.len() != SECRET_BYTES * 2 || !text.is_ascii() {
            return None;
        }
        let mut bytes = [0u8; SECRET_BYTES];
        for (i, byte) in bytes.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(Secret(bytes))
    }

    /// A public name of the session, for `Hello` frames and logs: derived one-way, it
    /// reveals nothing of the secret.
    pub fn session_id(&self) -> u64 {
        let mac = self.mac(&[SESSION_ID_LABEL]);
        u64::from_le_bytes(mac[..8].try_into().expect("8 bytes"))
    }

    fn keyed(&self, parts: &[&[u8]]) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key");
        for part in parts {
            mac.update(part);
        }
        mac
    }

    fn mac(&self, parts: &[&[u8]]) -> [u8; PROOF_BYTES] {
        self.keyed(parts).finalize().into_bytes().into()
    }

    /// Whether `proof` is the MAC of `parts`, compared in constant time.
    fn verify(&self, parts: &[&[u8]], proof: &[u8]) -> bool {
        self.keyed(parts).verify_slice(proof).is_ok()
    }
}

/// `N` bytes from the kernel's random source.
fn random_bytes<const N: usize>() -> Result<[u8; N], SstError> {
    let mut bytes = [0u8; N];
    File::open("/dev/urandom")
        .and_then(|mut source| source.read_exact(&mut bytes))
        .map_err(|e| SstError::io("reading /dev/urandom for the SST's session secret", e))?;
    Ok(bytes)
}

/// Loads and checks the TLS files (see [`crate::config::resolve_tls`]); a broken setup
/// fails here, before anything listens or connects.
pub fn load_tls(files: Option<&TlsFiles>) -> Result<Option<Arc<TlsContext>>, SstError> {
    let Some(files) = files else {
        log(
            "INFO",
            "no TLS for the SST ([sst] tkey/tcert, [sst] ssl-key/ssl-cert and the provider's \
             socket.ssl_* are unset): streams are plaintext, the session secret is proven \
             without being sent",
        );
        return Ok(None);
    };
    let context = TlsContext::load(files.clone())
        .map_err(|e| SstError::Config(format!("TLS for the SST cannot be used: {e}")))?;
    log("INFO", &format!("TLS for the SST: {}", describe(&context)));
    Ok(Some(Arc::new(context)))
}

/// This side's certificate and CA, for messages about a failed handshake.
fn describe(context: &TlsContext) -> String {
    let files = context.files();
    let ca_option = if files.ca.is_some() {
        files.labels.ca
    } else {
        files.labels.cert
    };
    format!(
        "certificate {:?} from {} {:?}, trusting the CA in {ca_option} {:?}",
        context.subject(),
        files.labels.cert,
        files.cert,
        files.ca_path()
    )
}

/// An I/O error on a connection in the DBA's words (a TLS alert explained).
pub fn describe_io(stream: &Stream, error: &io::Error) -> String {
    if stream.is_tls() {
        tls::explain(error)
    } else {
        error.to_string()
    }
}

/// Sets both timeouts of a socket.
pub fn set_timeouts(tcp: &TcpStream, timeout: Option<Duration>) -> io::Result<()> {
    tcp.set_read_timeout(timeout)?;
    tcp.set_write_timeout(timeout)
}

/// What every connection of one transfer is set up with: TLS when configured, and the
/// session secret.
#[derive(Clone, Debug)]
pub struct Session {
    secret: Secret,
    tls: Option<Arc<TlsContext>>,
}

impl Session {
    /// A session with this secret and TLS setup (`None`: plaintext).
    pub fn new(secret: Secret, tls: Option<Arc<TlsContext>>) -> Session {
        Session { secret, tls }
    }

    /// The session secret.
    pub fn secret(&self) -> &Secret {
        &self.secret
    }

    /// Whether connections run TLS.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Donor: the TLS client handshake when configured, then the proof exchange. Leaves the
    /// socket's timeouts at [`HANDSHAKE_TIMEOUT`] for the caller to change.
    pub fn open(&self, tcp: TcpStream, joiner: &str) -> Result<Stream, SstError> {
        set_timeouts(&tcp, Some(HANDSHAKE_TIMEOUT))
            .map_err(|e| SstError::io(format!("configuring the connection to {joiner}"), e))?;
        let mut stream = match &self.tls {
            Some(context) => context.connect(tcp, joiner).map_err(|e| {
                SstError::Tls(format!(
                    "TLS with the joiner at {joiner} failed: {}; this donor presents {}",
                    e.cause,
                    describe(context)
                ))
            })?,
            None => Stream::Plain(tcp),
        };
        self.prove_to_joiner(&mut stream, joiner)?;
        Ok(stream)
    }

    fn prove_to_joiner(&self, stream: &mut Stream, joiner: &str) -> Result<(), SstError> {
        let donor_nonce: [u8; NONCE_BYTES] = random_bytes()?;
        let mut greeting = Vec::with_capacity(GREETING_BYTES);
        greeting.extend_from_slice(&MAGIC);
        greeting.push(PROOF_VERSION);
        greeting.extend_from_slice(&donor_nonce);
        send(stream, &greeting).map_err(|e| self.donor_io(joiner, &e))?;
        let challenge = self.read_challenge(stream, joiner)?;
        let (joiner_nonce, joiner_proof) = challenge[MAGIC.len() + 1..].split_at(NONCE_BYTES);
        if !self
            .secret
            .verify(&[JOINER_LABEL, &donor_nonce, joiner_nonce], joiner_proof)
        {
            return Err(SstError::Peer(format!(
                "the peer at {joiner} did not prove the session secret of the address the \
                 group sent: it is not the joiner that requested this snapshot (another \
                 process on that port?); nothing was sent"
            )));
        }
        let answer = self.secret.mac(&[DONOR_LABEL, joiner_nonce, &donor_nonce]);
        send(stream, &answer).map_err(|e| self.donor_io(joiner, &e))?;
        let mut verdict = [0u8; 1];
        stream
            .read_exact(&mut verdict)
            .map_err(|e| self.donor_io(joiner, &e))?;
        match verdict[0] {
            ACCEPTED => Ok(()),
            first => Err(joiner_refusal(stream, &[first], joiner)),
        }
    }

    /// The joiner's challenge, or its refusal (an Error frame) as an error.
    fn read_challenge(
        &self,
        stream: &mut Stream,
        joiner: &str,
    ) -> Result<[u8; CHALLENGE_BYTES], SstError> {
        let mut challenge = [0u8; CHALLENGE_BYTES];
        let head = MAGIC.len() + 1;
        stream
            .read_exact(&mut challenge[..head])
            .map_err(|e| self.donor_io(joiner, &e))?;
        if challenge[..MAGIC.len()] != MAGIC || challenge[MAGIC.len()] != PROOF_VERSION {
            return Err(joiner_refusal(stream, &challenge[..head], joiner));
        }
        stream
            .read_exact(&mut challenge[head..])
            .map_err(|e| self.donor_io(joiner, &e))?;
        Ok(challenge)
    }

    /// A failed read or write of the donor's exchange: over TLS 1.3 the joiner's refusal of
    /// this donor's certificate arrives here, on the first read, not in the handshake.
    fn donor_io(&self, joiner: &str, error: &io::Error) -> SstError {
        match &self.tls {
            Some(context) => SstError::Tls(format!(
                "TLS with the joiner at {joiner} failed: {}; this donor presents {}",
                tls::explain(error),
                describe(context)
            )),
            None => match error.kind() {
                io::ErrorKind::UnexpectedEof => SstError::Peer(format!(
                    "the joiner at {joiner} closed the connection before admitting this \
                     donor: see its error log"
                )),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => SstError::Peer(format!(
                    "the peer at {joiner} did not answer within {} s: is it a trireme joiner?",
                    HANDSHAKE_TIMEOUT.as_secs()
                )),
                kind => SstError::io(
                    format!("proving the session secret to the joiner at {joiner}"),
                    io::Error::new(kind, error.to_string()),
                ),
            },
        }
    }
}

/// Writes all of `bytes` and flushes (a TLS stream holds them until then).
fn send(stream: &mut Stream, bytes: &[u8]) -> io::Result<()> {
    stream.write_all(bytes)?;
    stream.flush()
}

/// What the joiner sent instead of the expected bytes (`head`): its Error frame, or
/// something that is not a trireme joiner.
fn joiner_refusal(stream: &mut Stream, head: &[u8], joiner: &str) -> SstError {
    let mut rest = head.chain(stream);
    match read_frame(&mut rest, &mut Vec::new()) {
        Ok(Some(Frame::Error { message })) => SstError::Peer(format!(
            "the joiner at {joiner} refused this donor: {message}"
        )),
        Ok(_) | Err(_) => SstError::Protocol(format!(
            "the peer at {joiner} answered {head:02x?}, which is not a trireme SST joiner: \
             do both nodes run the same Trireme version with wsrep_sst_method=trireme?"
        )),
    }
}

impl Session {
    /// Joiner: the TLS server handshake when configured, then the donor must prove the
    /// secret. `Err` is why the connection was turned away, already told to the peer where
    /// it can read it. Leaves the socket's timeouts at [`HANDSHAKE_TIMEOUT`].
    pub fn admit(&self, tcp: TcpStream, peer: &str) -> Result<Stream, String> {
        set_timeouts(&tcp, Some(HANDSHAKE_TIMEOUT)).map_err(|e| e.to_string())?;
        let mut first = [0u8; 1];
        match tcp.peek(&mut first) {
            Ok(0) => return Err("it closed the connection without sending anything".into()),
            Ok(_) => {}
            Err(e) => return Err(format!("it sent nothing ({e})")),
        }
        let mut stream = match (&self.tls, tls::looks_like_tls(first[0])) {
            (Some(context), true) => context.accept(tcp, peer).map_err(|e| {
                format!(
                    "TLS failed: {}; this joiner presents {}",
                    e.cause,
                    describe(context)
                )
            })?,
            (Some(context), false) => return Err(refuse_plaintext(tcp, context)),
            (None, true) => return Err(refuse_tls(tcp)),
            (None, false) => Stream::Plain(tcp),
        };
        self.challenge_donor(&mut stream)?;
        Ok(stream)
    }

    fn challenge_donor(&self, stream: &mut Stream) -> Result<(), String> {
        let mut greeting = [0u8; GREETING_BYTES];
        stream
            .read_exact(&mut greeting)
            .map_err(|e| unproven(stream, &e))?;
        if greeting[..MAGIC.len()] != MAGIC || greeting[MAGIC.len()] != PROOF_VERSION {
            let reason = format!(
                "it sent {:02x?}, not a trireme donor's proof of the session secret (another \
                 program, or a Trireme version without it)",
                &greeting[..MAGIC.len() + 1]
            );
            return Err(refuse(stream, reason));
        }
        let donor_nonce = &greeting[MAGIC.len() + 1..];
        let joiner_nonce: [u8; NONCE_BYTES] = random_bytes().map_err(|e| e.to_string())?;
        let mut challenge = Vec::with_capacity(CHALLENGE_BYTES);
        challenge.extend_from_slice(&greeting[..MAGIC.len() + 1]);
        challenge.extend_from_slice(&joiner_nonce);
        challenge.extend_from_slice(&self.secret.mac(&[JOINER_LABEL, donor_nonce, &joiner_nonce]));
        let mut answer = [0u8; PROOF_BYTES];
        send(stream, &challenge)
            .and_then(|()| stream.read_exact(&mut answer))
            .map_err(|e| unproven(stream, &e))?;
        if !self
            .secret
            .verify(&[DONOR_LABEL, &joiner_nonce, donor_nonce], &answer)
        {
            let reason = "it did not prove the session secret of this joiner's ready address: \
                          only the donor the group chose for this SST may connect (a donor of \
                          an earlier SST attempt?)";
            return Err(refuse(stream, reason.into()));
        }
        send(stream, &[ACCEPTED]).map_err(|e| describe_io(stream, &e))
    }
}

/// Why a peer that broke off the proof exchange is turned away.
fn unproven(stream: &Stream, error: &io::Error) -> String {
    match error.kind() {
        io::ErrorKind::UnexpectedEof => "it closed the connection without proving the session \
                                         secret (a port check, or a donor of another SST \
                                         session: it leaves when this joiner's proof does not \
                                         match its own)"
            .into(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => format!(
            "it did not prove the session secret within {} s",
            HANDSHAKE_TIMEOUT.as_secs()
        ),
        _ => format!(
            "no proof of the session secret: {}",
            describe_io(stream, error)
        ),
    }
}

/// Tells the peer why it is refused (an Error frame) and waits for it to close; returns
/// the reason for this side's log.
fn refuse(stream: &mut Stream, reason: String) -> String {
    let frame = Frame::Error {
        message: reason.clone(),
    };
    if write_frame(stream, &frame, &[])
        .and_then(|()| stream.flush())
        .is_ok()
    {
        if let Ok(tcp) = stream.tcp().try_clone() {
            drain(&tcp, stream);
        }
    }
    reason
}

/// A plaintext peer of a joiner that requires TLS: told so in plaintext.
fn refuse_plaintext(tcp: TcpStream, context: &TlsContext) -> String {
    let files = context.files();
    let reason = format!(
        "it connected without TLS, but this joiner requires TLS for the SST ({} {:?}): \
         configure TLS for the SST on the donor too ([sst] tkey and tcert, [sst] ssl-key and \
         ssl-cert, or the provider's socket.ssl_key and socket.ssl_cert)",
        files.labels.cert, files.cert
    );
    refuse(&mut Stream::Plain(tcp), reason)
}

/// A TLS peer of a joiner without TLS. Plaintext bytes make its TLS stack report that this
/// side does not speak TLS, at once instead of after a timeout.
fn refuse_tls(tcp: TcpStream) -> String {
    let reason = "it speaks TLS, but this joiner has no TLS for the SST ([sst] tkey and \
                  tcert, [sst] ssl-key and ssl-cert, and the provider's socket.ssl_key and \
                  socket.ssl_cert are unset): configure the same TLS on both nodes";
    refuse(&mut Stream::Plain(tcp), reason.into())
}

/// Closes this side's direction, then reads (and drops) what the peer still sends until it
/// closes: closing with unread bytes would reset the connection and could destroy the
/// refusal before the peer read it.
fn drain(tcp: &TcpStream, reader: &mut impl Read) {
    let _ = tcp.set_read_timeout(Some(DRAIN_TIMEOUT));
    let _ = tcp.shutdown(Shutdown::Write);
    let mut buffer = [0u8; 4096];
    let mut drained = 0;
    while drained < DRAIN_BYTES {
        match reader.read(&mut buffer) {
            Ok(0) | Err(_) => return,
            Ok(n) => drained += n,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::path::{Path, PathBuf};
    use std::sync::{Mutex, OnceLock};
    use std::thread::{self, JoinHandle};
    use tls::Labels;

    /// The certificates of `scripts/make-test-certs.sh`, made once per test binary.
    pub(crate) fn certs() -> &'static Path {
        static DIR: OnceLock<PathBuf> = OnceLock::new();
        DIR.get_or_init(|| {
            remove_certs_of_finished_runs();
            let dir = std::env::temp_dir().join(format!("{CERTS_PREFIX}{}", std::process::id()));
            let script =
                Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/make-test-certs.sh");
            let status = std::process::Command::new(script)
                .arg(&dir)
                .status()
                .expect("run make-test-certs.sh");
            assert!(status.success(), "make-test-certs.sh failed");
            // A CA bundle with both CAs: a rogue node that trusts the cluster's CA but
            // presents a certificate of its own CA loads (its chain verifies).
            let bundle = [
                std::fs::read(dir.join("ca.pem")).unwrap(),
                std::fs::read(dir.join("rogue-ca.pem")).unwrap(),
            ]
            .concat();
            std::fs::write(dir.join("both-ca.pem"), bundle).unwrap();
            dir
        })
    }

    const CERTS_PREFIX: &str = "trireme-sst-certs-";

    /// A test process cannot remove its own directory (statics are not dropped): the next
    /// run removes those of processes that are gone.
    fn remove_certs_of_finished_runs() {
        let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(pid) = name.strip_prefix(CERTS_PREFIX) else {
                continue;
            };
            if pid.parse::<u32>().is_ok() && !Path::new(&format!("/proc/{pid}")).exists() {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }

    /// `[sst]` TLS files from the test certificates.
    pub(crate) fn files(key: &str, cert: &str, ca: &str) -> TlsFiles {
        TlsFiles {
            key: certs().join(key),
            cert: certs().join(cert),
            ca: Some(certs().join(ca)),
            password_file: None,
            cipher: None,
            labels: Labels::SST,
        }
    }

    /// A loaded TLS setup from the test certificates.
    pub(crate) fn tls(key: &str, cert: &str, ca: &str) -> Option<Arc<TlsContext>> {
        load_tls(Some(&files(key, cert, ca))).expect("test certificates load")
    }

    /// A donor session and a joiner session meet over loopback: both outcomes.
    fn meet(donor: Session, joiner: Session) -> (Result<Stream, SstError>, Result<Stream, String>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let joining = thread::spawn(move || {
            let (tcp, peer) = listener.accept().unwrap();
            joiner.admit(tcp, &peer.to_string())
        });
        let opened = donor.open(TcpStream::connect(&address).unwrap(), &address);
        let admitted = joining.join().unwrap();
        (opened, admitted)
    }

    fn secret() -> Secret {
        Secret::generate().unwrap()
    }

    #[test]
    fn secrets_print_and_parse_and_their_ids_reveal_nothing() {
        let (a, b) = (secret(), secret());
        let hex = a.to_hex();
        assert_eq!(hex.len(), SECRET_BYTES * 2);
        assert_eq!(Secret::from_hex(&hex).unwrap().to_hex(), hex);
        assert!(Secret::from_hex(&hex[2..]).is_none(), "too short");
        assert!(
            Secret::from_hex(&"zz".repeat(SECRET_BYTES)).is_none(),
            "not hex"
        );
        assert_ne!(hex, b.to_hex());
        assert_ne!(a.session_id(), b.session_id());
        let prefix = u64::from_le_bytes(a.0[..8].try_into().unwrap());
        assert_ne!(
            a.session_id(),
            prefix,
            "the id is derived, not a part of the secret"
        );
        assert!(
            !format!("{a:?}").contains(&hex[..16]),
            "Debug hides the secret"
        );
    }

    /// Copies one direction of a connection and records what crossed it.
    fn relay(mut from: TcpStream, mut to: TcpStream, seen: Arc<Mutex<Vec<u8>>>) -> JoinHandle<()> {
        thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            loop {
                match from.read(&mut buffer) {
                    Ok(0) | Err(_) => {
                        let _ = to.shutdown(Shutdown::Write);
                        return;
                    }
                    Ok(n) => {
                        seen.lock().unwrap().extend_from_slice(&buffer[..n]);
                        if to.write_all(&buffer[..n]).is_err() {
                            return;
                        }
                    }
                }
            }
        })
    }

    #[test]
    fn a_donor_with_the_secret_is_admitted_and_the_secret_never_crosses_the_wire() {
        let shared = secret();
        let joiner = Session::new(shared.clone(), None);
        let donor = Session::new(shared.clone(), None);
        let joiner_listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let joiner_address = joiner_listener.local_addr().unwrap();
        let joining = thread::spawn(move || {
            let (tcp, peer) = joiner_listener.accept().unwrap();
            let mut stream = joiner.admit(tcp, &peer.to_string())?;
            read_frame(&mut stream, &mut Vec::new()).map_err(|e| e.to_string())
        });
        // Everything between donor and joiner passes a recording relay.
        let relay_listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let relay_address = relay_listener.local_addr().unwrap().to_string();
        let donor_tcp = TcpStream::connect(&relay_address).unwrap();
        let (inbound, _) = relay_listener.accept().unwrap();
        let outbound = TcpStream::connect(joiner_address).unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let relays = [
            relay(
                inbound.try_clone().unwrap(),
                outbound.try_clone().unwrap(),
                seen.clone(),
            ),
            relay(outbound, inbound, seen.clone()),
        ];
        let mut stream = donor.open(donor_tcp, &relay_address).expect("admitted");
        write_frame(&mut stream, &Frame::Finished, &[]).unwrap();
        drop(stream);
        let received = joining
            .join()
            .unwrap()
            .expect("the joiner admitted the donor");
        assert_eq!(
            received,
            Some(Frame::Finished),
            "frames flow after the proof"
        );
        relays.into_iter().for_each(|r| r.join().unwrap());
        let wire = seen.lock().unwrap().clone();
        assert!(
            wire.windows(3).any(|w| w == MAGIC),
            "the relay saw the exchange"
        );
        let hex = shared.to_hex();
        assert!(
            !wire.windows(SECRET_BYTES).any(|w| w == shared.0),
            "raw secret sent"
        );
        assert!(
            !wire.windows(8).any(|w| w == &hex.as_bytes()[..8]),
            "hex secret sent"
        );
    }

    #[test]
    fn a_peer_that_cannot_prove_the_secret_is_refused_and_told_why() {
        let joiner = Session::new(secret(), None);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let joining = thread::spawn(move || {
            let (tcp, peer) = listener.accept().unwrap();
            joiner.admit(tcp, &peer.to_string()).map(|_| ())
        });
        // A peer that knows the protocol but not the secret.
        let mut tcp = TcpStream::connect(address).unwrap();
        tcp.write_all(&[&MAGIC[..], &[PROOF_VERSION], &[7u8; NONCE_BYTES]].concat())
            .unwrap();
        let mut challenge = [0u8; CHALLENGE_BYTES];
        tcp.read_exact(&mut challenge).unwrap();
        tcp.write_all(&[0u8; PROOF_BYTES]).unwrap();
        let told = read_frame(&mut tcp, &mut Vec::new()).unwrap();
        drop(tcp);
        let reason = joining.join().unwrap().unwrap_err();
        assert!(
            reason.contains("did not prove the session secret"),
            "{reason}"
        );
        match told {
            Some(Frame::Error { message }) => assert_eq!(message, reason),
            other => panic!("expected an Error frame, got {other:?}"),
        }
    }

    #[test]
    fn a_donor_of_another_session_is_refused_before_it_sends_anything() {
        let (opened, admitted) = meet(Session::new(secret(), None), Session::new(secret(), None));
        let error = opened.unwrap_err();
        assert!(matches!(error, SstError::Peer(_)), "{error:?}");
        assert!(
            error
                .to_string()
                .contains("did not prove the session secret"),
            "{error}"
        );
        let reason = admitted.unwrap_err();
        assert!(
            reason.contains("without proving the session secret"),
            "{reason}"
        );
    }

    #[test]
    fn tls_donor_and_joiner_authenticate_each_other() {
        let shared = secret();
        let donor = Session::new(shared.clone(), tls("node-b.key", "node-b.pem", "ca.pem"));
        let joiner = Session::new(shared, tls("node.key", "node.pem", "ca.pem"));
        let (opened, admitted) = meet(donor, joiner);
        let (opened, admitted) = (opened.unwrap(), admitted.unwrap());
        assert!(opened.is_tls() && admitted.is_tls());
        let joiner_seen = opened.peer_subject().unwrap();
        let donor_seen = admitted.peer_subject().unwrap();
        assert!(joiner_seen.ends_with("CN=node"), "{joiner_seen}");
        assert!(donor_seen.ends_with("CN=node-b"), "{donor_seen}");
    }

    /// Neither message may read as a timeout: each side names the refused certificate.
    fn assert_not_a_timeout(message: &str) {
        assert!(
            !message.contains("in time") && !message.contains("timed out"),
            "{message}"
        );
    }

    #[test]
    fn a_donor_with_a_rogue_certificate_is_refused_and_both_sides_say_why() {
        let shared = secret();
        // It trusts the cluster's CA, but its certificate comes from another CA.
        let donor = Session::new(shared.clone(), tls("rogue.key", "rogue.pem", "both-ca.pem"));
        let joiner = Session::new(shared, tls("node.key", "node.pem", "ca.pem"));
        let (opened, admitted) = meet(donor, joiner);
        let reason = admitted.unwrap_err();
        assert!(reason.contains("certificate was refused"), "{reason}");
        assert!(
            reason.contains("ca.pem"),
            "names the CA it trusts: {reason}"
        );
        let error = opened.unwrap_err();
        assert!(matches!(error, SstError::Tls(_)), "{error:?}");
        let message = error.to_string();
        assert!(
            message.contains("refused this node's certificate"),
            "{message}"
        );
        assert!(
            message.contains("CN=rogue node") && message.contains("rogue.pem"),
            "{message}"
        );
        assert_not_a_timeout(&reason);
        assert_not_a_timeout(&message);
    }

    #[test]
    fn a_donor_that_distrusts_the_joiner_stops_and_both_sides_say_why() {
        let shared = secret();
        let donor = Session::new(
            shared.clone(),
            tls("rogue.key", "rogue.pem", "rogue-ca.pem"),
        );
        let joiner = Session::new(shared, tls("node.key", "node.pem", "ca.pem"));
        let (opened, admitted) = meet(donor, joiner);
        let message = opened.unwrap_err().to_string();
        assert!(message.contains("certificate was refused"), "{message}");
        let reason = admitted.unwrap_err();
        assert!(
            reason.contains("refused this node's certificate"),
            "{reason}"
        );
        assert_not_a_timeout(&reason);
        assert_not_a_timeout(&message);
    }

    #[test]
    fn a_plaintext_donor_is_refused_by_a_tls_joiner_with_a_clear_message() {
        let shared = secret();
        let joiner = Session::new(shared.clone(), tls("node.key", "node.pem", "ca.pem"));
        let (opened, admitted) = meet(Session::new(shared, None), joiner);
        let reason = admitted.unwrap_err();
        assert!(reason.contains("connected without TLS"), "{reason}");
        let error = opened.unwrap_err();
        assert!(matches!(error, SstError::Peer(_)), "{error:?}");
        let message = error.to_string();
        assert!(message.contains("requires TLS for the SST"), "{message}");
        assert!(
            message.contains("node.pem"),
            "names the joiner's setting: {message}"
        );
    }

    #[test]
    fn a_tls_donor_is_told_that_the_joiner_has_no_tls() {
        let shared = secret();
        let donor = Session::new(shared.clone(), tls("node.key", "node.pem", "ca.pem"));
        let (opened, admitted) = meet(donor, Session::new(shared, None));
        let reason = admitted.unwrap_err();
        assert!(
            reason.contains("speaks TLS, but this joiner has no TLS"),
            "{reason}"
        );
        let message = opened.unwrap_err().to_string();
        assert!(message.contains("does not speak TLS"), "{message}");
        assert_not_a_timeout(&message);
    }

    #[test]
    fn broken_tls_files_fail_at_load_naming_the_option_and_file() {
        let expired = load_tls(Some(&files("expired.key", "expired.pem", "ca.pem"))).unwrap_err();
        assert!(matches!(expired, SstError::Config(_)), "{expired:?}");
        assert!(expired.to_string().contains("expired.pem"), "{expired}");
        let missing = load_tls(Some(&files("absent.key", "node.pem", "ca.pem"))).unwrap_err();
        let missing = missing.to_string();
        assert!(
            missing.contains("[sst] tkey") && missing.contains("absent.key"),
            "{missing}"
        );
        let mut encrypted = files("encrypted.key", "node.pem", "ca.pem");
        let locked = load_tls(Some(&encrypted)).unwrap_err().to_string();
        assert!(locked.contains("socket.ssl_password_file"), "{locked}");
        encrypted.password_file = Some(certs().join("password.txt"));
        assert!(load_tls(Some(&encrypted)).unwrap().is_some());
        assert!(load_tls(None).unwrap().is_none(), "no files: plaintext");
    }
}
