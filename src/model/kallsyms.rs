//! The kernel's function symbols as /proc/kallsyms lists them, for naming
//! kernel addresses the way perf does: a symbol covers the addresses up
//! to the next one (kallsyms gives no sizes); `T`/`t` and weak `W`/`w`
//! symbols count, as perf's `symbol_type__filter` keeps them; of aliases
//! at one address (`memcpy`, `__pi_memcpy`) the last listed.

/// Whether a kallsyms type letter is a function's (text, or weak).
pub fn is_function_type(kind: &str) -> bool {
    matches!(kind, "t" | "T" | "w" | "W")
}

/// Function symbols sorted by address: each its address and where its
/// name lies in `names` (one string for all: a table of 200,000 symbols
/// without as many allocations).
#[derive(Debug, Default, Clone)]
pub struct KernelSymbols {
    table: Vec<(u64, u32, u32)>,
    names: String,
}

impl KernelSymbols {
    pub fn parse(text: &str) -> KernelSymbols {
        let mut names = String::with_capacity(text.len() / 2);
        let mut table: Vec<(u64, u32, u32)> = text
            .lines()
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                let addr = u64::from_str_radix(w.next()?, 16).ok()?;
                let kind = w.next()?;
                let name = w.next()?;
                if addr == 0 || !is_function_type(kind) {
                    return None;
                }
                let at = u32::try_from(names.len()).ok()?;
                names.push_str(name);
                Some((addr, at, name.len() as u32))
            })
            .collect();
        // Stable: of several symbols at one address the last listed is
        // the one perf names (its fixup gives that one the length).
        table.sort_by_key(|(a, _, _)| *a);
        KernelSymbols { table, names }
    }

    fn name(&self, at: u32, len: u32) -> &str {
        &self.names[at as usize..(at + len) as usize]
    }

    /// This machine's, or none when /proc/kallsyms cannot be read or
    /// hides its addresses (kptr_restrict shows them all as 0).
    pub fn of_this_machine() -> KernelSymbols {
        KernelSymbols::parse(&std::fs::read_to_string("/proc/kallsyms").unwrap_or_default())
    }

    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// The symbol `addr` is in and the offset into it.
    pub fn lookup(&self, addr: u64) -> Option<(&str, u64)> {
        let i = self
            .table
            .partition_point(|(a, _, _)| *a <= addr)
            .checked_sub(1)?;
        let (start, at, len) = self.table[i];
        Some((self.name(at, len), addr - start))
    }

    /// `name` for a symbol's start, `name+0x10` inside it.
    pub fn resolve(&self, addr: u64) -> Option<String> {
        let (name, off) = self.lookup(addr)?;
        Some(if off == 0 {
            name.to_string()
        } else {
            format!("{name}+{off:#x}")
        })
    }

    /// The address of a symbol (`_text`, for the kernel's relocation).
    pub fn address_of(&self, name: &str) -> Option<u64> {
        self.table
            .iter()
            .find(|(_, at, len)| self.name(*at, *len) == name)
            .map(|(a, _, _)| *a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_inside_and_before_the_first() {
        let k = KernelSymbols::parse(
            "0000000000000200 T b\n0000000000000100 t a\n0000000000000180 D data\n0000000000000000 T hidden\n",
        );
        assert_eq!(k.resolve(0x100).as_deref(), Some("a"));
        assert_eq!(k.resolve(0x190).as_deref(), Some("a+0x90"));
        assert_eq!(k.resolve(0x210).as_deref(), Some("b+0x10"));
        assert_eq!(k.resolve(0x50), None);
        assert_eq!(k.address_of("b"), Some(0x200));
        let aliases = KernelSymbols::parse("10 T memcpy\n10 T __pi_memcpy\n20 T next\n");
        assert_eq!(aliases.resolve(0x18).as_deref(), Some("__pi_memcpy+0x8"));
    }
}
