//! Operating-system helpers: commands with a time limit, `/proc`, signals, users, ports.
//!
//! The workspace forbids `unsafe`, so signals go through `kill(1)` and user lookups through
//! `getent(1)`; process facts come from `/proc`.

use std::fs::{self, File};
use std::io::Read;
use std::net::TcpListener;
use std::os::unix::fs::lchown;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

/// What a finished command printed.
#[derive(Debug)]
pub(crate) struct Output {
    pub(crate) status: ExitStatus,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// How long a poll loop sleeps between checks.
const POLL: Duration = Duration::from_millis(20);
/// How long [`wait_until`] sleeps between checks.
const WAIT_UNTIL_POLL: Duration = Duration::from_millis(100);

/// Polls `done` every 100 ms for at most `timeout`; returns whether it became true.
pub(crate) fn wait_until(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(WAIT_UNTIL_POLL);
    }
}

/// Describes a command for error messages: the program and its arguments.
pub(crate) fn describe(cmd: &Command) -> String {
    let mut text = cmd.get_program().to_string_lossy().into_owned();
    for arg in cmd.get_args() {
        text.push(' ');
        text.push_str(&arg.to_string_lossy());
    }
    text
}

/// Runs `cmd` with stdin from /dev/null, captures stdout and stderr, and kills it if it
/// has not finished after `timeout`.
pub(crate) fn run_captured(cmd: &mut Command, timeout: Duration) -> Result<Output> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let what = describe(cmd);
    let mut child = cmd.spawn().with_context(|| format!("cannot run {what}"))?;
    let (tx, rx) = mpsc::channel::<(bool, Vec<u8>)>();
    let readers: [(bool, Option<Box<dyn Read + Send>>); 2] = [
        (
            true,
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
        ),
        (
            false,
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
        ),
    ];
    for (is_stdout, reader) in readers {
        let Some(mut reader) = reader else { continue };
        let tx = tx.clone();
        // A grandchild may keep the pipe open; the reader is then left behind, not joined.
        thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = reader.read_to_end(&mut buf);
            let _ = tx.send((is_stdout, buf));
        });
    }
    drop(tx);
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child
            .try_wait()
            .with_context(|| format!("waiting for {what}"))?
        {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "{what} did not finish within {} s and was killed",
                timeout.as_secs()
            );
        }
        thread::sleep(POLL);
    };
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let drain_deadline = Instant::now() + Duration::from_secs(5);
    for _ in 0..2 {
        let left = drain_deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((true, buf)) => stdout = buf,
            Ok((false, buf)) => stderr = buf,
            Err(_) => break,
        }
    }
    Ok(Output {
        status,
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    })
}

/// Runs `cmd` with stdout and stderr appended to `log`, killing it after `timeout`.
pub(crate) fn run_logged(cmd: &mut Command, log: &Path, timeout: Duration) -> Result<ExitStatus> {
    let file = File::options()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("cannot open {}", log.display()))?;
    cmd.stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file);
    let what = describe(cmd);
    let mut child = cmd.spawn().with_context(|| format!("cannot run {what}"))?;
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child
            .try_wait()
            .with_context(|| format!("waiting for {what}"))?
        {
            return Ok(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "{what} did not finish within {} s and was killed (log: {})",
                timeout.as_secs(),
                log.display()
            );
        }
        thread::sleep(POLL);
    }
}

/// The state letter of a process from `/proc/PID/stat` (`R`, `S`, `T`, `Z`, ...).
pub(crate) fn proc_state(pid: u32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may contain anything; the state follows it.
    let after = &stat[stat.rfind(')')? + 1..];
    after.trim_start().chars().next()
}

/// The command line of a process.
pub(crate) fn proc_cmdline(pid: u32) -> Option<Vec<String>> {
    let raw = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(
        raw.split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect(),
    )
}

/// The effective uid of a process (`/proc/PID/status`, line `Uid:`), or of this process
/// with `pid = None`.
pub(crate) fn proc_euid(pid: Option<u32>) -> Option<u32> {
    let path = match pid {
        Some(pid) => format!("/proc/{pid}/status"),
        None => "/proc/self/status".to_string(),
    };
    let status = fs::read_to_string(path).ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

/// Whether `pid` is a live (not zombie) process whose command line mentions `marker`.
/// The marker (the node's my.cnf path) tells a recycled pid from our server.
pub(crate) fn is_our_process(pid: u32, marker: &str) -> bool {
    match proc_state(pid) {
        None | Some('Z') | Some('X') => false,
        Some(_) => proc_cmdline(pid).is_some_and(|args| args.iter().any(|a| a.contains(marker))),
    }
}

/// Sends `signal` (a name such as `TERM` or `KILL`) to `pid` with `kill(1)`.
pub(crate) fn send_signal(pid: u32, signal: &str) -> Result<()> {
    let out = run_captured(
        Command::new("kill").args(["-s", signal, &pid.to_string()]),
        Duration::from_secs(10),
    )?;
    if !out.status.success() {
        bail!("kill -s {signal} {pid} failed: {}", out.stderr.trim());
    }
    Ok(())
}

/// Whether nothing listens on 127.0.0.1:`port` (checked by binding it).
pub(crate) fn port_free(port: u16) -> bool {
    TcpListener::bind(("127.0.0.1", port)).is_ok()
}

/// Whether this process runs as root.
pub(crate) fn running_as_root() -> bool {
    proc_euid(None) == Some(0)
}

/// The uid and gid of `user`, if it exists.
pub(crate) fn lookup_user(user: &str) -> Result<Option<(u32, u32)>> {
    let out = run_captured(
        Command::new("getent").args(["passwd", user]),
        Duration::from_secs(10),
    )?;
    if !out.status.success() {
        return Ok(None);
    }
    let fields: Vec<&str> = out.stdout.trim().split(':').collect();
    if fields.len() < 4 {
        bail!(
            "getent passwd {user} printed an unexpected line: {:?}",
            out.stdout.trim()
        );
    }
    let uid = fields[2]
        .parse()
        .with_context(|| format!("uid of {user}"))?;
    let gid = fields[3]
        .parse()
        .with_context(|| format!("gid of {user}"))?;
    Ok(Some((uid, gid)))
}

/// Returns the uid and gid of the unprivileged system user `user`, creating it first if it
/// does not exist (requires root).
pub(crate) fn ensure_system_user(user: &str) -> Result<(u32, u32)> {
    if let Some(ids) = lookup_user(user)? {
        return Ok(ids);
    }
    eprintln!("trireme: creating the unprivileged system user {user:?} to run the servers");
    let out = run_captured(
        Command::new("useradd").args([
            "--system",
            "--user-group",
            "--no-create-home",
            "--shell",
            "/usr/sbin/nologin",
            user,
        ]),
        Duration::from_secs(30),
    )?;
    if !out.status.success() {
        bail!(
            "useradd {user} failed ({}): {}; create the user by hand or run as a non-root user",
            out.status,
            out.stderr.trim()
        );
    }
    lookup_user(user)?.ok_or_else(|| anyhow!("useradd {user} succeeded but getent cannot see it"))
}

/// `chown -R uid:gid path`, without following symbolic links.
pub(crate) fn chown_tree(path: &Path, uid: u32, gid: u32) -> Result<()> {
    lchown(path, Some(uid), Some(gid))
        .with_context(|| format!("cannot chown {} to {uid}:{gid}", path.display()))?;
    let meta = fs::symlink_metadata(path)?;
    if meta.is_dir() {
        for entry in fs::read_dir(path)? {
            chown_tree(&entry?.path(), uid, gid)?;
        }
    }
    Ok(())
}

/// The last `lines` lines of a text file, or a note saying why there are none.
pub(crate) fn tail(path: &Path, lines: usize) -> String {
    match fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let all: Vec<&str> = text.lines().collect();
            let start = all.len().saturating_sub(lines);
            if all.is_empty() {
                format!("({} is empty)", path.display())
            } else {
                all[start..].join("\n")
            }
        }
        Err(e) => format!("(cannot read {}: {e})", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_found_by_its_command_line() {
        let pid = std::process::id();
        assert!(matches!(proc_state(pid), Some('R') | Some('S')));
        let args = proc_cmdline(pid).unwrap();
        assert!(is_our_process(pid, &args[0]));
        assert!(!is_our_process(pid, "no-such-marker-anywhere"));
        assert!(proc_euid(Some(pid)).is_some());
    }

    #[test]
    fn commands_are_captured_and_time_limited() {
        let out = run_captured(
            Command::new("sh").args(["-c", "echo out; echo err >&2; exit 3"]),
            Duration::from_secs(10),
        )
        .unwrap();
        assert_eq!(out.stdout, "out\n");
        assert_eq!(out.stderr, "err\n");
        assert_eq!(out.status.code(), Some(3));
        let started = Instant::now();
        let err = run_captured(Command::new("sleep").arg("30"), Duration::from_millis(300));
        assert!(err.unwrap_err().to_string().contains("did not finish"));
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn tail_keeps_the_last_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        fs::write(&path, "a\nb\nc\n").unwrap();
        assert_eq!(tail(&path, 2), "b\nc");
        assert!(tail(&dir.path().join("missing"), 2).contains("cannot read"));
    }
}
