//! Log-linear buckets, as HdrHistogram and the light BPF programs keep
//! them: values below 2^(BITS+1) exact, larger ones in 2^BITS buckets per
//! power of two, so a bucket is at most 1/2^BITS of its values wide. One
//! definition for the in-memory histograms (`analyze::histogram`, BITS 7)
//! and the kernel's (`bpf/light.h`, BITS 5, which `abi_check` compares).

/// The bucket of `v`.
#[inline]
pub fn bucket_of<const BITS: u32>(v: u64) -> usize {
    let sub = 1u64 << BITS;
    if v < 2 * sub {
        return v as usize;
    }
    let e = 63 - v.leading_zeros() - BITS;
    (e as usize) * sub as usize + (v >> e) as usize
}

/// The inclusive range of values of bucket `i`.
pub fn bucket_range<const BITS: u32>(i: usize) -> (u64, u64) {
    let sub = 1usize << BITS;
    if i < 2 * sub {
        return (i as u64, i as u64);
    }
    let e = (i / sub - 1) as u32;
    let low = ((i - (e as usize) * sub) as u64) << e;
    (low, low + (1u64 << e) - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contiguous_and_tight<const BITS: u32>(n: usize) {
        let mut prev = None;
        for i in 0..n {
            let (lo, hi) = bucket_range::<BITS>(i);
            if let Some(p) = prev {
                assert_eq!(lo, p + 1, "bucket {i}");
            }
            assert_eq!(bucket_of::<BITS>(lo), i);
            assert_eq!(bucket_of::<BITS>(hi), i);
            assert!((hi - lo) as f64 <= lo as f64 / ((1u64 << BITS) - 1) as f64 + 1.0);
            prev = Some(hi);
        }
    }

    #[test]
    fn buckets_are_contiguous_and_tight() {
        contiguous_and_tight::<7>(128 * 40);
        contiguous_and_tight::<5>(1184);
        assert_eq!(bucket_of::<5>((1 << 41) - 1), 1183);
        assert_eq!(bucket_of::<7>(u64::MAX), 128 * 58 - 1);
    }
}
