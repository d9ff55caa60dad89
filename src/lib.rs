//! iosleuth: find out why Linux I/O got slow.
//!
//! The pipeline follows DESIGN.md, one module a stage: `capture` (live
//! recording) and `ingest` (files other tools wrote) produce a typed,
//! time-ordered event stream (`model`); `analyze` turns it into plain data;
//! `diagnose` names root causes from it and the system snapshot; `compare`
//! sets two sides of runs against each other; `report` renders any of it.
//! `pipeline` wires the stages, `cli` parses arguments and calls it, `lab`
//! reproduces the known pathologies on disks it makes itself.

mod analyze;
mod capture;
mod cli;
mod compare;
mod diagnose;
mod error;
#[doc(hidden)]
pub mod fuzz_input;
mod ingest;
mod lab;
mod model;
mod pipeline;
mod progress;
mod report;
mod symbolize;
mod trial;
mod watch;

// The binary's entry: run the command line, map the outcome to an exit code.
pub use cli::run;
pub use error::{Error, ExitStatus};
pub use report::escape::escape_lines;

/// What the test binaries (tests/offline, tests/live) and the fuzz targets
/// reach inside. Not an API for other programs: it changes with them.
#[doc(hidden)]
pub mod testing {
    pub use crate::analyze::{analyze, block::BlockConfig, Analysis, Filter};
    pub use crate::capture::blk_tracer::{BlkTracerOptions, BlkTracerSession};
    pub use crate::capture::build_ids::build_id;
    pub use crate::capture::cgroups::{io_hierarchy, Hierarchy};
    pub use crate::capture::journal::remove_instance;
    pub use crate::capture::light::maps::Counters as LightMapCounters;
    pub use crate::capture::pipe::PipeReader;
    pub use crate::capture::snapshot::{ext4_journal, mono_ns};
    pub use crate::capture::tracefs::{CaptureError, Tracefs};
    pub use crate::capture::unique_name;
    pub use crate::diagnose::diagnose;
    pub use crate::diagnose::rules_doc::markdown as rules_markdown;
    pub use crate::ingest::format_decoder::Decoder;
    pub use crate::ingest::reader::Chunked;
    pub use crate::ingest::text_source::{detect, TextFormat, TextSource};
    pub use crate::ingest::{open_bytes, open_file, open_inputs, warnings_for, Merger, Source};
    pub use crate::lab::{ext4::Ext4, loopdev::LoopDevice, slowdisk::Stall};
    pub use crate::model::event_sets::EVENT_SETS;
    pub use crate::model::light::{
        LightDevice, LightDoc, SlowRequest, CONTEXT_HEADER, SLOW_HEADER, SLOW_RECORD,
    };
    pub use crate::model::{Action, BlockEvent, Dev, Event, Extra, Rwbs};
    pub use crate::pipeline::{analyze as analyze_paths, Options};
    pub use crate::report::blktrace::{export as export_blktrace, Target, MAX_CPUS};
    pub use crate::report::json::{render as render_json, SCHEMA_VERSION};
    pub use crate::report::perfetto::proto;
    pub use crate::report::text::render as render_text;
    pub use crate::report::Format;
    pub use crate::watch::http::{Pages as HttpPages, Server as HttpServer};
}
