//! Symbolisation: names for the addresses captures hold as numbers. ELF
//! symbol tables (by build id), perf's JIT maps, the processes' mappings
//! over time and the kernel's symbols. Beside `ingest`, which decodes
//! events and asks here for names; `model` only holds what both share.

pub mod elf_reader;
pub mod elf_symbols;
pub mod kallsyms;
pub mod perf_map;
pub mod process_maps;
pub mod user_frames;
