//! What user space assumes about the BPF side, checked against its source
//! and its object without loading anything (no root): every constant and
//! struct of bpf/light.h against maps.rs and model/light.rs, field by field
//! and by name; every program and map that user space opens by name
//! against the symbols of the committed object.

use super::maps::*;
use super::{
    all_programs, event_program, FAULT_FLOOR_PROGRAMS, FLOOR_EVENT_PROGRAM, FLOOR_PROGRAMS, OBJECT,
};
use crate::model::light::{
    CpuCounters, EventRecord, LightCounters, SlowRequest, WaitRecord, CONTEXT_EVENTS,
    EVENT_DATA_AT, EVENT_RECORD, NBUCKET, REC_EVENT, REC_SLOW, REC_WAIT, SLOW_RECORD, SUB_BITS,
    WAIT_RECORD,
};
use object::{Object, ObjectSection, ObjectSymbol};
use std::collections::{BTreeMap, BTreeSet};

const LIGHT_H: &str = include_str!("../../../bpf/light.h");

/// One field of a C struct as the compiler lays it out: natural alignment.
#[derive(Debug, PartialEq)]
struct CField {
    name: String,
    offset: usize,
    size: usize,
}

struct Header {
    defines: BTreeMap<String, u64>,
    structs: BTreeMap<String, Vec<CField>>,
}

fn strip_comments(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("/*") {
        out.push_str(&rest[..i]);
        let end = rest[i..]
            .find("*/")
            .expect("an unterminated comment in light.h");
        rest = &rest[i + end + 2..];
    }
    out.push_str(rest);
    out
}

/// The `#define NAME NUMBER`s and the structs of light.h: enough C for a
/// header of fixed-size integers, arrays of them and char arrays.
fn parse_header(text: &str) -> Header {
    let text = strip_comments(text);
    let mut defines = BTreeMap::new();
    for line in text.lines() {
        let mut w = line.split_whitespace();
        if w.next() == Some("#define") {
            if let (Some(name), Some(v)) = (w.next(), w.next()) {
                defines.insert(name.to_string(), v.parse().expect("a number"));
            }
        }
    }
    let mut structs = BTreeMap::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("struct ") {
        rest = &rest[i + 7..];
        let Some(open) = rest.find('{') else { break };
        let name = rest[..open].trim().to_string();
        let close = rest.find("};").expect("a struct's end");
        let (mut offset, mut align) = (0usize, 1usize);
        let mut fields = Vec::new();
        for decl in rest[open + 1..close].split(';').map(str::trim) {
            if decl.is_empty() {
                continue;
            }
            let (ty, var) = decl.rsplit_once(char::is_whitespace).expect("type name");
            let elem = match ty.trim() {
                "__u64" | "__s64" => 8,
                "__u32" | "__s32" => 4,
                "__u16" | "__s16" => 2,
                "__u8" | "char" => 1,
                other => panic!("light.h: type {other} is not known to this check"),
            };
            let (var, count) = match var.split_once('[') {
                Some((v, n)) => {
                    let n = n.trim_end_matches(']');
                    let n = n
                        .parse()
                        .unwrap_or_else(|_| *defines.get(n).expect("a defined length"));
                    (v, n as usize)
                }
                None => (var, 1),
            };
            offset = offset.next_multiple_of(elem);
            align = align.max(elem);
            fields.push(CField {
                name: var.to_string(),
                offset,
                size: elem * count,
            });
            offset += elem * count;
        }
        let size = offset.next_multiple_of(align);
        fields.push(CField {
            name: "sizeof".into(),
            offset: size,
            size: 0,
        });
        structs.insert(name, fields);
        rest = &rest[close..];
    }
    Header { defines, structs }
}

/// The fields of a Rust mirror, laid out as rustc does, in the order
/// written: `(name, offset, size)`, then its size. A field written
/// `name as Set` is a set of counters (model::light::counters) and stands
/// for each of its counters by name, as light.h spells them out.
macro_rules! rust_layout {
    ($t:ty { $($f:ident $(as $set:ty)?),* $(,)? }) => {{
        // SAFETY: the mirrors are plain integers and arrays of them, for
        // which all-zero bytes are a value.
        let z: $t = unsafe { std::mem::zeroed() };
        let mut v: Vec<CField> = Vec::new();
        $(
            let offset = std::mem::offset_of!($t, $f);
            let size = std::mem::size_of_val(&z.$f);
            rust_layout!(@field v, $f, offset, size $(, $set)?);
        )*
        v.push(CField { name: "sizeof".into(), offset: std::mem::size_of::<$t>(), size: 0 });
        v
    }};
    ($set:ty as counters) => {{
        let offset = 0;
        let size = std::mem::size_of::<$set>();
        let mut v: Vec<CField> = Vec::new();
        rust_layout!(@field v, counters, offset, size, $set);
        v.push(CField { name: "sizeof".into(), offset: size, size: 0 });
        v
    }};
    (@field $v:ident, $f:ident, $offset:ident, $size:ident) => {
        $v.push(CField { name: stringify!($f).to_string(), offset: $offset, size: $size });
    };
    (@field $v:ident, $f:ident, $offset:ident, $size:ident, $set:ty) => {
        assert_eq!($size, 8 * <$set>::NAMES.len(), "{} is its counters", stringify!($set));
        for (i, name) in <$set>::NAMES.iter().enumerate() {
            $v.push(CField { name: name.to_string(), offset: $offset + 8 * i, size: 8 });
        }
    };
}

fn op_slot(name: &str) -> Option<u64> {
    crate::model::light::OPS
        .iter()
        .position(|o| *o == name)
        .map(|i| i as u64)
}

#[test]
fn every_constant_of_light_h_is_the_one_user_space_uses() {
    let h = parse_header(LIGHT_H);
    let rust: BTreeMap<&str, u64> = [
        ("IOSL_LIGHT_H", None),
        ("NSLOT", Some(u64::from(NSLOT))),
        ("NOP", Some(u64::from(NOP))),
        ("DEV_HASH_MUL", Some(u64::from(DEV_HASH_MUL))),
        ("DEV_HASH_SHIFT", Some(u64::from(DEV_HASH_SHIFT))),
        ("NDEVIDX", Some(u64::from(NDEVIDX))),
        (
            "MAX_DEPTH_CPUS",
            Some(crate::model::light::MAX_DEPTH_CPUS as u64),
        ),
        // The operation slots, by the names user space gives them.
        ("OP_READ", op_slot("read")),
        ("OP_WRITE", op_slot("write")),
        ("OP_FLUSH", op_slot("flush")),
        ("OP_DISCARD", op_slot("discard")),
        ("NSTAGE", Some(u64::from(NSTAGE))),
        ("SUB_BITS", Some(u64::from(SUB_BITS))),
        ("NBUCKET", Some(NBUCKET as u64)),
        ("NDEPTH", Some(NDEPTH as u64)),
        ("NSIZE", Some(NSIZE as u64)),
        ("NSOFTIRQ", Some(NSOFTIRQ as u64)),
        ("NUOP", Some(u64::from(NUOP))),
        ("NCGROUP", Some(u64::from(NCGROUP))),
        ("NLE", Some(NLE as u64)),
        ("NCGCACHE", Some(u64::from(NCGCACHE))),
        ("REC_SLOW", Some(u64::from(REC_SLOW))),
        ("REC_EVENT", Some(u64::from(REC_EVENT))),
        ("REC_WAIT", Some(u64::from(REC_WAIT))),
        ("EVENT_DATA", Some((EVENT_RECORD - EVENT_DATA_AT) as u64)),
    ]
    .into_iter()
    .filter_map(|(k, v)| v.map(|v| (k, v)))
    .collect();
    let c: BTreeMap<&str, u64> = h
        .defines
        .iter()
        .filter(|(k, _)| k.as_str() != "IOSL_LIGHT_H")
        .map(|(k, v)| (k.as_str(), *v))
        .collect();
    assert_eq!(c, rust, "bpf/light.h's constants against user space's");
}

/// The kernel counts each cgroup's requests under the bounds user space
/// serves as `le`: le_bucket's comparisons, in order, are LE_NS.
#[test]
fn the_kernels_cgroup_buckets_are_the_le_bounds_served() {
    let c = include_str!("../../../bpf/light.bpf.c");
    let f = &c[c.find("le_bucket(__u64 ns)").expect("le_bucket")..];
    let f = &f[..f.find("return b;").expect("its end")];
    let bounds: Vec<u64> = f
        .lines()
        .filter_map(|l| l.trim().strip_prefix("b += ns > "))
        .map(|l| l.trim_end_matches("ULL;").parse().expect("a bound"))
        .collect();
    assert_eq!(bounds, crate::model::light::LE_NS);
}

#[test]
fn every_map_value_struct_of_light_h_is_laid_out_as_its_mirror() {
    let h = parse_header(LIGHT_H);
    let mirrors = [
        ("hist", rust_layout!(Hist { n, sum, b })),
        ("depth_hist", rust_layout!(DepthHist { b })),
        ("size_hist", rust_layout!(SizeHist { b })),
        (
            "counters",
            rust_layout!(Counters {
                ios,
                bytes,
                counts as LightCounters,
                issued,
                retired,
                last_end,
            }),
        ),
        ("cg_key", rust_layout!(CgKey { id, slot, op })),
        ("uring_stats", rust_layout!(UringStats as counters)),
        (
            "cg_stats",
            rust_layout!(CgStats {
                id,
                slot,
                op_used,
                ios,
                bytes,
                time_ns,
                le
            }),
        ),
        (
            "cpu_stats",
            rust_layout!(CpuStats {
                counts as CpuCounters,
                softirqs,
                softirq_ns,
            }),
        ),
    ];
    for (name, rust) in &mirrors {
        assert_eq!(&h.structs[*name], rust, "struct {name}");
    }
    let records = ["slow_rec", "event_rec", "wait_rec"];
    let covered: BTreeSet<&str> = mirrors.iter().map(|m| m.0).chain(records).collect();
    let all: BTreeSet<&str> = h.structs.keys().map(String::as_str).collect();
    assert_eq!(
        all, covered,
        "a struct of light.h that this check does not know"
    );
}

/// A record of `name` as the kernel writes it: each field holds a value
/// of its own (field i: bytes 0x10+i), so that a parser reading the wrong
/// offset reads another field's value.
fn record(h: &Header, name: &str) -> (Vec<u8>, BTreeMap<String, Vec<u8>>) {
    let fields = &h.structs[name];
    let size = fields.last().unwrap().offset;
    let mut b = vec![0u8; size];
    let mut values = BTreeMap::new();
    for (i, f) in fields.iter().filter(|f| f.name != "sizeof").enumerate() {
        let v: Vec<u8> = (0..f.size)
            .map(|k| 0x10 + i as u8 + (k as u8 & 1))
            .collect();
        b[f.offset..f.offset + f.size].copy_from_slice(&v);
        values.insert(f.name.clone(), v);
    }
    (b, values)
}

fn le(v: &[u8]) -> u64 {
    v.iter().rev().fold(0, |a, &x| (a << 8) | u64::from(x))
}

/// Asserts that each named field of the parsed record is the value the
/// C layout put in the field of that name, and that no C field is left out.
macro_rules! same_fields {
    ($rec:expr, $values:expr, skip [$($s:literal),*], ints [$($f:ident),*], bytes [$($b:ident),*]) => {{
        let values = &$values;
        let mut seen: BTreeSet<&str> = [$($s),*].into_iter().collect();
        $(
            assert_eq!($rec.$f as u64, le(&values[stringify!($f)]) & (u64::MAX >> (64 - 8 * values[stringify!($f)].len())), stringify!($f));
            seen.insert(stringify!($f));
        )*
        $(
            assert_eq!(&$rec.$b[..], &values[stringify!($b)][..], stringify!($b));
            seen.insert(stringify!($b));
        )*
        let all: BTreeSet<&str> = values.keys().map(String::as_str).collect();
        assert_eq!(all, seen, "fields of the C record against those the parser reads");
    }};
}

#[test]
fn every_record_of_light_h_is_read_at_its_fields_offsets() {
    let h = parse_header(LIGHT_H);

    let (mut b, v) = record(&h, "slow_rec");
    assert_eq!(b.len(), SLOW_RECORD);
    b[..2].copy_from_slice(&REC_SLOW.to_le_bytes());
    b[2..4].copy_from_slice(&(SLOW_RECORD as u16).to_le_bytes());
    let r = SlowRequest::parse(&b).expect("a slow record");
    let raw = le(&v["dev"]) as u32;
    assert_eq!(r.dev, crate::model::Dev::new(raw >> 20, raw & 0xfffff));
    same_fields!(r, v, skip ["kind", "len", "dev"],
        ints [alloc_ns, issue_ns, complete_ns, sector, cgroup_id, bytes, cmd_flags, pid, tid,
              issue_cpu, complete_cpu, depth, error],
        bytes [comm]);

    let (mut b, v) = record(&h, "wait_rec");
    assert_eq!(b.len(), WAIT_RECORD);
    b[..2].copy_from_slice(&REC_WAIT.to_le_bytes());
    let r = WaitRecord::parse(&b).expect("a wait record");
    same_fields!(r, v, skip ["kind", "len"],
        ints [cpu, start_ns, wait_ns, held_ns, rt_ns, tid, prio, holder_tid, holder_prio, rt_tid,
              rt_prio],
        bytes [comm, holder_comm, rt_comm]);

    let (mut b, v) = record(&h, "event_rec");
    assert_eq!(b.len(), EVENT_RECORD);
    let data_at = h.structs["event_rec"]
        .iter()
        .find(|f| f.name == "data")
        .unwrap();
    assert_eq!(data_at.offset, EVENT_DATA_AT);
    b[..2].copy_from_slice(&REC_EVENT.to_le_bytes());
    let r = EventRecord::parse(&b).expect("an event record");
    same_fields!(r, v, skip ["kind", "len", "pad"],
        ints [cpu, ts_ns, tid, event], bytes [comm, data]);
}

#[test]
fn every_program_and_map_opened_by_name_is_in_the_object() {
    // The ELF reader wants its headers aligned; include_bytes! is not.
    let mut words = vec![0u64; OBJECT.len().div_ceil(8)];
    // SAFETY: the buffer holds at least OBJECT.len() bytes.
    let aligned =
        unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), OBJECT.len()) };
    aligned.copy_from_slice(OBJECT);
    let obj = object::File::parse(&*aligned).expect("bpf/light.bpf.o is an ELF object");
    let section_of = |s: &object::Symbol| {
        s.section_index()
            .and_then(|i| obj.section_by_index(i).ok())
            .and_then(|s| s.name().ok().map(str::to_string))
    };
    let mut programs = BTreeMap::new();
    let mut maps = BTreeSet::new();
    for s in obj.symbols() {
        let (Ok(name), Some(section)) = (s.name(), section_of(&s)) else {
            continue;
        };
        if section == ".maps" {
            maps.insert(name.to_string());
        } else if s.kind() == object::SymbolKind::Text && section != ".text" {
            programs.insert(name.to_string(), section);
        }
    }
    for (p, tp) in all_programs()
        .chain(FLOOR_PROGRAMS.iter())
        .chain(FAULT_FLOOR_PROGRAMS.iter())
    {
        assert_eq!(
            programs.get(*p).map(String::as_str),
            Some(format!("tp_btf/{tp}").as_str()),
            "program {p}"
        );
    }
    for (system, event) in CONTEXT_EVENTS {
        assert_eq!(
            programs.get(&event_program(event)).map(String::as_str),
            Some(format!("tracepoint/{system}/{event}").as_str()),
            "the program of {system}:{event}"
        );
    }
    assert!(programs.contains_key(FLOOR_EVENT_PROGRAM));
    for m in MAPS {
        assert!(maps.contains(m), "map {m} is not in the object: {maps:?}");
    }
}

#[test]
fn the_header_parser_reads_what_a_compiler_would() {
    let h = parse_header(
        "#define N 3\n/* a\n comment */ struct s {\n __u16 a; __u64 b; char c[N]; };\n",
    );
    assert_eq!(h.defines["N"], 3);
    let f = &h.structs["s"];
    assert_eq!(
        f.iter().map(|f| (f.offset, f.size)).collect::<Vec<_>>(),
        [(0, 2), (8, 8), (16, 3), (24, 0)]
    );
}
