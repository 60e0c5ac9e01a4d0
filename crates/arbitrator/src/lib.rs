//! `trireme-arbitrator`: a member of the group that holds no database, in the spirit of
//! Galera's `garbd`. It is a Raft voter: it keeps the ordering log and counts towards every
//! quorum, so two data nodes and an arbitrator keep a primary component when any one of the
//! three fails. It never asks for state, so it stays in the PRIMARY member state: donor
//! choice, consistency votes and flow control count only members that hold data (see
//! `group::GroupState`), and it reports no commits, so it never holds back the commit cut.
//!
//! - [`config`]: garbd's command line and configuration file as [`config::Settings`];
//! - [`member`]: the member itself, run until a signal asks it to leave.

// An I/O shell like `transport`: real sockets, threads and the wall clock.
#![allow(clippy::disallowed_methods)]

pub mod config;
pub mod member;
