//! iosleuth: find out why Linux I/O got slow.
//!
//! The pipeline follows DESIGN.md: `capture` and `ingest` produce a typed,
//! time-ordered event stream (`model`), `analyze` turns it into plain data,
//! `report` renders it.

pub mod analyze;
pub mod capture;
pub mod cli;
pub mod compare;
pub mod diagnose;
pub mod ingest;
pub mod lab;
pub mod model;
pub mod report;
