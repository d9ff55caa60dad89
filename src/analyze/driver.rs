//! Below the block layer: the driver's own events split a request's D2C
//! into the time before the command reached the device, the device's
//! time, and the completion path after it. The measured eMMC stall's proof was the 269 ms
//! between `mmc_request_start` and `mmc_request_done` of one journal
//! write.
//!
//! A driver command is matched to the request the block layer issued at
//! the same sector (the request still in flight, issued before the
//! command started) on a disk of the driver's kind (by major number).
//! The sector comes from the command: an MMC data command's `cmd_arg`
//! (the 512-byte block of a high-capacity card), NVMe's `slba` (LBAs of
//! 512 bytes, else of 4096), SCSI's `lba` (likewise). Commands are paired
//! start to end by what the driver names them with: the MMC host (one
//! request at a time), NVMe's controller, queue and command id, SCSI's
//! host, channel, target, LUN and tag. What the text of a trace does not
//! carry (NVMe's `cdw10` and SCSI's CDB in binary captures) leaves the
//! command unmatched: counted, never guessed.

use super::histogram::{LatencyDist, Percentiles};
use super::top::{keep_largest, qualifies};
use crate::model::tracepoint::Field;
use crate::model::{Action, BlockEvent, Dev, TraceEvent, Tracepoint};
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::collections::BTreeMap;

/// The slowest device commands kept, with their requests.
const SLOWEST: usize = 5;
/// In-flight requests remembered at most (a trace that never completes
/// its requests must not grow without end).
const MAX_IN_FLIGHT: usize = 1 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Driver {
    Mmc,
    Nvme,
    Scsi,
}

impl Driver {
    /// Its one spelling, in the text and in JSON (`mmc`, `nvme`, `scsi`).
    pub fn name(self) -> &'static str {
        match self {
            Driver::Mmc => "mmc",
            Driver::Nvme => "nvme",
            Driver::Scsi => "scsi",
        }
    }

    /// Whether any of them drives a disk of this major number.
    fn any_drives(major: u32) -> bool {
        [Driver::Mmc, Driver::Nvme, Driver::Scsi]
            .iter()
            .any(|d| d.drives(major))
    }

    /// Whether a disk of this major number is driven by it: mmcblk 179,
    /// NVMe namespaces on the extended major 259, sd 8, 65–71, 128–135.
    fn drives(self, major: u32) -> bool {
        match self {
            Driver::Mmc => major == 179,
            Driver::Nvme => major == 259,
            Driver::Scsi => matches!(major, 8 | 65..=71 | 128..=135),
        }
    }
}

impl Serialize for Driver {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// A command as its start event describes it.
struct Started {
    driver: Driver,
    /// Pairs the start with its end.
    key: String,
    /// Candidate 512-byte sectors (one per possible block size).
    sectors: Vec<u64>,
    what: String,
}

#[derive(Clone, Copy)]
struct Issued {
    ts: u64,
    bytes: u32,
}

struct Open {
    start_ns: u64,
    what: String,
    driver: Driver,
    request: Option<(Dev, u64, Issued)>,
}

/// A device command matched to its request, once it ended.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DeviceCommand {
    pub driver: Driver,
    pub device: String,
    pub sector: u64,
    pub bytes: u32,
    /// The driver's name of the command (`cmd_opcode=25`, `nvme_cmd_write`).
    pub command: String,
    pub issue_ns: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    /// Issue (D) → the driver's start: the driver's own time before the
    /// device had the command.
    pub before_device_ns: u64,
    /// The driver's start → its end: the device's time.
    pub device_ns: u64,
}

/// One disk's requests with a driver command.
#[derive(Debug, Serialize, Default)]
pub struct DriverDevice {
    pub device: String,
    pub driver: Option<Driver>,
    /// Requests matched to a command that ended.
    pub commands: u64,
    /// Issue → the driver's start.
    pub before_device: Percentiles,
    /// The driver's start → its end.
    pub in_device: Percentiles,
    /// The driver's end → the request's completion (requests completed
    /// in the trace).
    pub after_device: Percentiles,
}

#[derive(Debug, Serialize, Default)]
pub struct DriverSummary {
    pub devices: Vec<DriverDevice>,
    /// The commands that spent longest in the device, longest first.
    pub slowest: Vec<DeviceCommand>,
    /// Commands that ended without a request at their sector (or whose
    /// sector the trace does not say), and ends without a start.
    pub unmatched_commands: u64,
    pub ends_without_start: u64,
}

#[derive(Default)]
struct Dists {
    driver: Option<Driver>,
    commands: u64,
    before: LatencyDist,
    device: LatencyDist,
    after: LatencyDist,
}

#[derive(Default)]
pub struct DriverAnalysis {
    /// Requests issued and not completed, by sector.
    in_flight: FxHashMap<u64, Vec<(Dev, Issued)>>,
    in_flight_count: usize,
    open: FxHashMap<String, Open>,
    /// Requests whose command ended, waiting for their completion:
    /// (dev, sector) → the driver's end.
    ended: FxHashMap<(Dev, u64), u64>,
    by_dev: BTreeMap<Dev, Dists>,
    slowest: Vec<DeviceCommand>,
    unmatched: u64,
    ends_without_start: u64,
}

impl DriverAnalysis {
    pub fn new() -> Self {
        Self::default()
    }

    /// A block event: only issues to a disk a driver here drives (the
    /// loop and virtio disks of most traces cost nothing), and completions
    /// while something is in flight or ended, can matter (the check
    /// inlined where every block event passes).
    #[inline]
    pub fn block(&mut self, b: &BlockEvent) {
        let matters = match b.action {
            Action::Issue => {
                self.in_flight_count < MAX_IN_FLIGHT && Driver::any_drives(b.dev.major())
            }
            Action::Complete => self.in_flight_count > 0 || !self.ended.is_empty(),
            _ => false,
        };
        if matters {
            self.block_step(b);
        }
    }

    /// An event `block` found can matter.
    fn block_step(&mut self, b: &BlockEvent) {
        match b.action {
            Action::Issue => {
                let v = self.in_flight.entry(b.sector).or_default();
                let before = v.len();
                v.retain(|(d, _)| *d != b.dev);
                self.in_flight_count -= before - v.len();
                v.push((
                    b.dev,
                    Issued {
                        ts: b.ts,
                        bytes: b.bytes,
                    },
                ));
                self.in_flight_count += 1;
            }
            Action::Complete => {
                if let Some(v) = self.in_flight.get_mut(&b.sector) {
                    let before = v.len();
                    v.retain(|(d, _)| *d != b.dev);
                    self.in_flight_count -= before - v.len();
                    if v.is_empty() {
                        self.in_flight.remove(&b.sector);
                    }
                }
                if let Some(end) = self.ended.remove(&(b.dev, b.sector)) {
                    if let Some(d) = self.by_dev.get_mut(&b.dev) {
                        d.after.add(b.ts.saturating_sub(end));
                    }
                }
            }
            _ => {}
        }
    }

    /// A driver event; true when it is one. Inlined: most events are not
    /// a driver's, and a call to say so cost more than the question.
    #[inline]
    pub fn add(&mut self, o: &TraceEvent) -> bool {
        o.kind.is_driver_command() && self.driver_event(o)
    }

    /// One of the kinds `add` lets through (`started`, `ended`).
    #[inline(never)]
    fn driver_event(&mut self, o: &TraceEvent) -> bool {
        let name = o.kind;
        if matches!(
            name,
            Tracepoint::MmcRequestStart
                | Tracepoint::NvmeSetupCmd
                | Tracepoint::ScsiDispatchCmdStart
        ) {
            // Commands that move no data (MMC status polls) pair nothing.
            let Some(s) = started(name, o) else {
                return true;
            };
            let request = self.request_at(s.driver, &s.sectors, o.ts);
            self.open.insert(
                s.key,
                Open {
                    start_ns: o.ts,
                    what: s.what,
                    driver: s.driver,
                    request,
                },
            );
            return true;
        }
        if name == Tracepoint::MmcRequestDone
            && o.fields
                .int(Field::CmdOpcode)
                .is_some_and(|op| !MMC_DATA_OPCODES.contains(&op))
        {
            return true;
        }
        let Some(key) = ended(name, o) else {
            return false;
        };
        let Some(c) = self.open.remove(&key) else {
            self.ends_without_start += 1;
            return true;
        };
        let Some((dev, sector, issued)) = c.request else {
            self.unmatched += 1;
            return true;
        };
        let device_ns = o.ts.saturating_sub(c.start_ns);
        let before_device_ns = c.start_ns.saturating_sub(issued.ts);
        let d = self.by_dev.entry(dev).or_default();
        d.driver = Some(c.driver);
        d.commands += 1;
        d.before.add(before_device_ns);
        d.device.add(device_ns);
        self.ended.insert((dev, sector), o.ts);
        // Its device named (a string) only when it is among the slowest.
        if !qualifies(&self.slowest, SLOWEST, device_ns, |c| c.device_ns) {
            return true;
        }
        let cmd = DeviceCommand {
            driver: c.driver,
            device: dev.to_string(),
            sector,
            bytes: issued.bytes,
            command: c.what,
            issue_ns: issued.ts,
            start_ns: c.start_ns,
            end_ns: o.ts,
            before_device_ns,
            device_ns,
        };
        keep_largest(
            &mut self.slowest,
            cmd,
            SLOWEST,
            |c| c.device_ns,
            |c| c.start_ns,
        );
        true
    }

    /// The in-flight request at one of `sectors` on a disk of `driver`'s
    /// kind, issued by `ts`.
    fn request_at(&self, driver: Driver, sectors: &[u64], ts: u64) -> Option<(Dev, u64, Issued)> {
        sectors.iter().find_map(|s| {
            self.in_flight
                .get(s)?
                .iter()
                .filter(|(d, i)| driver.drives(d.major()) && i.ts <= ts)
                .max_by_key(|(_, i)| i.ts)
                .map(|(d, i)| (*d, *s, *i))
        })
    }

    pub fn finish(self) -> DriverSummary {
        DriverSummary {
            devices: self
                .by_dev
                .into_iter()
                .map(|(dev, d)| DriverDevice {
                    device: dev.to_string(),
                    driver: d.driver,
                    commands: d.commands,
                    before_device: d.before.summary(),
                    in_device: d.device.summary(),
                    after_device: d.after.summary(),
                })
                .collect(),
            slowest: self.slowest,
            unmatched_commands: self.unmatched + self.open.len() as u64,
            ends_without_start: self.ends_without_start,
        }
    }
}

/// MMC's data commands: READ_SINGLE_BLOCK 17, READ_MULTIPLE_BLOCK 18,
/// WRITE_BLOCK 24, WRITE_MULTIPLE_BLOCK 25 (include/linux/mmc/mmc.h).
const MMC_DATA_OPCODES: [i64; 4] = [17, 18, 24, 25];

/// The MMC host an event names (`name` in binary captures; the text's
/// `mmc0:` prefix is not a field, and one host is one queue then).
fn mmc_host(o: &TraceEvent) -> String {
    // With command queueing several requests are out at once, by tag.
    let f = &o.fields;
    format!(
        "mmc {} {}",
        f.str(Field::Name).unwrap_or(""),
        f.int(Field::Tag).unwrap_or(0)
    )
}

fn nvme_key(o: &TraceEvent) -> Option<String> {
    let f = &o.fields;
    let ctrl = f.int(Field::CtrlId).map(|c| c.to_string());
    let disk = f.str(Field::Disk).map(str::to_string);
    let cid = f.int(Field::Cmdid).or_else(|| f.int(Field::Cid))?;
    Some(format!(
        "nvme {} {} {cid}",
        ctrl.or(disk).unwrap_or_default(),
        f.int(Field::Qid)?
    ))
}

fn scsi_key(o: &TraceEvent) -> Option<String> {
    let f = &o.fields;
    Some(format!(
        "scsi {} {} {} {} {}",
        f.int(Field::HostNo)?,
        f.int(Field::Channel)?,
        f.int(Field::Id)?,
        f.int(Field::Lun)?,
        f.int(Field::DriverTag).unwrap_or(-1)
    ))
}

/// 512-byte sectors of a logical block address whose block size the
/// trace does not say: 512 bytes, else 4096.
fn lba_sectors(lba: i64) -> Vec<u64> {
    let lba = lba as u64;
    vec![lba, lba.saturating_mul(8)]
}

/// The command as the text names it (`cmd=(nvme_cmd_write …` gives
/// `nvme_cmd_write`), or its opcode where the trace has only numbers.
fn command_name(o: &TraceEvent, field: Field) -> String {
    let f = &o.fields;
    f.str(field)
        .map(|c| c.trim_start_matches('(').to_string())
        .unwrap_or_else(|| format!("opcode={}", f.int(Field::Opcode).unwrap_or(-1)))
}

fn started(name: Tracepoint, o: &TraceEvent) -> Option<Started> {
    let f = &o.fields;
    match name {
        Tracepoint::MmcRequestStart => {
            let op = f.int(Field::CmdOpcode)?;
            let arg = f.int(Field::CmdArg)?;
            // `blk_addr` (newer kernels) is the sector; else the argument:
            // high-capacity cards address 512-byte blocks, others bytes.
            let sectors = match f.int(Field::BlkAddr) {
                Some(b) => vec![b as u64],
                None => vec![arg as u64, arg as u64 / 512],
            };
            (MMC_DATA_OPCODES.contains(&op)).then(|| Started {
                driver: Driver::Mmc,
                key: mmc_host(o),
                sectors,
                what: format!("cmd_opcode={op}"),
            })
        }
        Tracepoint::NvmeSetupCmd => Some(Started {
            driver: Driver::Nvme,
            key: nvme_key(o)?,
            sectors: f.int(Field::Slba).map(lba_sectors).unwrap_or_default(),
            what: command_name(o, Field::Cmd),
        }),
        Tracepoint::ScsiDispatchCmdStart => Some(Started {
            driver: Driver::Scsi,
            key: scsi_key(o)?,
            sectors: f.int(Field::Lba).map(lba_sectors).unwrap_or_default(),
            what: command_name(o, Field::Cmnd),
        }),
        _ => None,
    }
}

fn ended(name: Tracepoint, o: &TraceEvent) -> Option<String> {
    match name {
        Tracepoint::MmcRequestDone => Some(mmc_host(o)),
        Tracepoint::NvmeCompleteRq => nvme_key(o),
        Tracepoint::ScsiDispatchCmdDone
        | Tracepoint::ScsiDispatchCmdTimeout
        | Tracepoint::ScsiDispatchCmdError => scsi_key(o),
        _ => None,
    }
}
