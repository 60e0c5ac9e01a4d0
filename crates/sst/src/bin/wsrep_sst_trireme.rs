//! `wsrep_sst_trireme`: the SST script MariaDB runs for `wsrep_sst_method=trireme`.
//!
//! Joiner: prints `ready <address>` once it listens, then the snapshot's `uuid:seqno`.
//! Donor: prints `done <uuid:seqno>` once the joiner confirmed the snapshot.
//! Everything else goes to stderr, which the server copies into its error log. The exit
//! code is an errno value, as the server reports it.

#![allow(clippy::disallowed_methods)] // an I/O shell: processes, threads, the clock

use std::process::ExitCode;

use sst::config::{Args, Role, Settings};
use sst::{donor, joiner, log, SstError};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The `tracing` warnings of the libraries (the TLS crate logs a refused peer certificate
/// with its subject, the error and the CA file) as `WSREP_SST: [LEVEL] ...` lines on
/// stderr, which the server copies into its error log.
struct SstLines;

impl<S, N> FormatEvent<S, N> for SstLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        let level = match *event.metadata().level() {
            Level::ERROR => "ERROR",
            Level::WARN => "WARNING",
            _ => "INFO",
        };
        write!(writer, "WSREP_SST: [{level}] ")?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

fn run() -> Result<(), SstError> {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let args = Args::parse(&argv)?;
    let settings = Settings::load(&args)?;
    match args.role.expect("parse requires a role") {
        Role::Joiner => {
            let prepared = joiner::preflight(&args, &settings)?;
            joiner::print_line(&format!("ready {}", prepared.ready))
                .map_err(|e| SstError::io("writing the ready line", e))?;
            log(
                "INFO",
                &format!("joiner listening for the donor at {}", prepared.listening),
            );
            let joined = joiner::run_joiner(&args, &settings, prepared)?;
            joiner::print_line(&joined.position)
                .map_err(|e| SstError::io("writing the position", e))?;
        }
        Role::Donor => {
            donor::run_donor(&args, &settings)?;
            let mut position = args.gtid.clone().unwrap_or_default();
            if let Some(domain) = &args.gtid_domain_id {
                position = format!("{position} {domain}");
            }
            joiner::print_line(&format!("done {position}"))
                .map_err(|e| SstError::io("writing the done line", e))?;
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_max_level(Level::WARN)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .event_format(SstLines)
        .init();
    match std::panic::catch_unwind(run) {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(error)) => {
            log("ERROR", &format!("trireme SST failed: {error}"));
            ExitCode::from(u8::try_from(error.exit_code()).unwrap_or(1))
        }
        Err(_) => {
            log(
                "ERROR",
                "trireme SST failed: internal error (panic); see the message above",
            );
            ExitCode::from(71)
        }
    }
}
