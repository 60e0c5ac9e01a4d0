//! `trireme-arbitrator`: see the crate documentation.

#![allow(clippy::disallowed_methods)] // a daemon: the wall clock and its own process

use std::fs::OpenOptions;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use arbitrator::config::{Args, Settings};
use clap::Parser;

/// Set in the background process a `--daemon` start spawns, which then runs in place.
const DAEMONIZED: &str = "TRIREME_ARBITRATOR_DAEMONIZED";

fn main() -> ExitCode {
    let settings = match Settings::from_args(Args::parse()) {
        Ok(settings) => settings,
        Err(error) => {
            eprintln!("trireme-arbitrator: {error}");
            return ExitCode::from(2);
        }
    };
    // The background process reads the same arguments from the same directory, so a
    // relative --cfg names the same file; only then does it move to --workdir.
    if settings.daemon && std::env::var_os(DAEMONIZED).is_none() {
        return start_in_background();
    }
    if let Some(dir) = &settings.workdir {
        if let Err(error) = std::env::set_current_dir(dir) {
            eprintln!("trireme-arbitrator: --workdir {}: {error}", dir.display());
            return ExitCode::from(2);
        }
    }
    if let Err(error) = init_logging(settings.log.as_deref()) {
        eprintln!("trireme-arbitrator: --log: {error}");
        return ExitCode::from(2);
    }
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        if let Err(error) = signal_hook::flag::register(signal, Arc::clone(&stop)) {
            tracing::error!("cannot handle signal {signal}: {error}");
            return ExitCode::FAILURE;
        }
    }
    match arbitrator::member::run(&settings, &stop) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("arbitrator failed: {error}");
            eprintln!("trireme-arbitrator: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Starts this program again, detached from the terminal's process group and with no
/// standard streams (it logs to `--log`), and returns at once.
fn start_in_background() -> ExitCode {
    let spawned = std::env::current_exe().and_then(|program| {
        Command::new(program)
            .args(std::env::args_os().skip(1))
            .env(DAEMONIZED, "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
    });
    match spawned {
        Ok(child) => {
            println!(
                "trireme-arbitrator: running in the background, pid {}",
                child.id()
            );
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("trireme-arbitrator: cannot start in the background: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Log lines with their time, to `log` (appended) or standard error.
fn init_logging(log: Option<&Path>) -> std::io::Result<()> {
    let builder = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_target(false)
        .with_max_level(tracing::Level::INFO);
    match log {
        Some(path) => {
            let file = OpenOptions::new().create(true).append(true).open(path)?;
            builder.with_writer(Mutex::new(file)).init();
        }
        None => builder.with_writer(std::io::stderr).init(),
    }
    Ok(())
}
