//! Loading and attaching the object's programs: the BTF-typed raw
//! tracepoints (attached for the whole session, or while an option holds)
//! and the context events' classic tracepoints.

use super::programs::{event_program, FLOOR_EVENT_PROGRAM};
use super::{err, load_error, CaptureError};
use crate::model::light::CONTEXT_EVENTS;
use aya::programs::{BtfTracePoint, TracePoint};
use aya::{Btf, Ebpf};

pub(super) type Links = Vec<(&'static str, aya::programs::tp_btf::BtfTracePointLinkId)>;

/// Attaches (or detaches) the loaded `programs`, keeping their links in
/// `links`; nothing when they already are as asked.
pub(super) fn set_attached(
    ebpf: &mut Ebpf,
    links: &mut Links,
    programs: &[(&'static str, &'static str)],
    on: bool,
) -> Result<(), CaptureError> {
    if on != links.is_empty() {
        return Ok(());
    }
    for (name, tp) in programs {
        let p = btf_program(ebpf, name)?;
        if on {
            let link = p
                .attach()
                .map_err(|e| load_error(format!("attaching {name} to {tp}: {e}")))?;
            links.push((name, link));
        } else if let Some(i) = links.iter().position(|(n, _)| n == name) {
            let (_, link) = links.swap_remove(i);
            p.detach(link)
                .map_err(|e| err("cannot detach")(format!("{name}: {e}")))?;
        }
    }
    Ok(())
}

/// Loads and attaches the BTF-typed raw tracepoint programs.
pub(super) fn attach_btf(
    ebpf: &mut Ebpf,
    btf: &Btf,
    programs: &[(&str, &str)],
) -> Result<(), CaptureError> {
    load_btf(ebpf, btf, programs)?;
    for (name, tp) in programs {
        btf_program(ebpf, name)?
            .attach()
            .map_err(|e| load_error(format!("attaching {name} to {tp}: {e}")))?;
    }
    Ok(())
}

/// Loads (verifies) BTF-typed raw tracepoint programs without attaching them.
pub(super) fn load_btf(
    ebpf: &mut Ebpf,
    btf: &Btf,
    programs: &[(&str, &str)],
) -> Result<(), CaptureError> {
    for (name, tp) in programs {
        btf_program(ebpf, name)?
            .load(tp, btf)
            .map_err(|e| load_error(format!("{name}: {e}")))?;
    }
    Ok(())
}

/// A BTF-typed raw tracepoint program of the object.
fn btf_program<'a>(ebpf: &'a mut Ebpf, name: &str) -> Result<&'a mut BtfTracePoint, CaptureError> {
    ebpf.program_mut(name)
        .expect("program in the object")
        .try_into()
        .map_err(load_error)
}

/// Attaches each context event's program (or, for the floor, one empty
/// program to all of them); returns the events this kernel lacks.
pub(super) fn attach_events(ebpf: &mut Ebpf, floor: bool) -> Result<Vec<String>, CaptureError> {
    let mut missing = Vec::new();
    if floor {
        let p = tracepoint_program(ebpf, FLOOR_EVENT_PROGRAM)?;
        for (system, event) in CONTEXT_EVENTS {
            let _ = p.attach(system, event);
        }
        return Ok(missing);
    }
    for (system, event) in CONTEXT_EVENTS {
        let p = tracepoint_program(ebpf, &event_program(event))?;
        if p.attach(system, event).is_err() {
            missing.push(format!("{system}:{event}"));
        }
    }
    Ok(missing)
}

/// A classic tracepoint program of the object, loaded.
fn tracepoint_program<'a>(
    ebpf: &'a mut Ebpf,
    name: &str,
) -> Result<&'a mut TracePoint, CaptureError> {
    let p: &mut TracePoint = ebpf
        .program_mut(name)
        .expect("program in the object")
        .try_into()
        .map_err(load_error)?;
    p.load().map_err(|e| load_error(format!("{name}: {e}")))?;
    Ok(p)
}
