//! iosleuth: find out why Linux I/O got slow.
//!
//! The pipeline follows DESIGN.md, one module a stage: `capture` (live
//! recording) and `ingest` (files other tools wrote) produce a typed,
//! time-ordered event stream (`model`); `analyze` turns it into plain data;
//! `diagnose` names root causes from it and the system snapshot; `compare`
//! sets two sides of runs against each other; `report` renders any of it.
//! `pipeline` wires the stages, `cli` parses arguments and calls it, `lab`
//! reproduces the known pathologies on disks it makes itself.

pub mod analyze;
pub mod capture;
pub mod cli;
pub mod compare;
pub mod diagnose;
pub mod error;
#[doc(hidden)]
pub mod fuzz_input;
pub mod ingest;
pub mod lab;
pub mod model;
pub mod pipeline;
pub mod progress;
pub mod report;
