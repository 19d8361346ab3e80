//! ASLR-stable call-site keys, exactly as `native/common/heaplab_site.h`
//! computes them in C: the replayer's site hints, the segmented allocator's
//! run-time lookup and the predictors trained here must agree bit for bit.
//!
//! ```text
//!   frame_key = fnv1a64(basename(module path)) ^ (offset * 0x9E3779B97F4A7C15)
//!   site_hash(k0..kn) = fmix(fnv1a64 over whole 64-bit keys)        (0 for no key)
//! ```

/// FNV-1a, 64 bits.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The part of a module path after its last '/' (bytes: a path need not be UTF-8).
pub fn basename(path: &[u8]) -> &[u8] {
    path.rsplit(|&b| b == b'/').next().unwrap_or(path)
}

/// The fold of a module's name that every key of its frames starts from.
pub fn module_hash(path: impl AsRef<[u8]>) -> u64 {
    fnv1a64(basename(path.as_ref()))
}

/// The key of one frame: `offset` is the return address minus the module's
/// load bias (module 0, "no module": the empty name and the absolute address).
pub fn frame_key(path: impl AsRef<[u8]>, offset: u64) -> u64 {
    module_hash(path) ^ offset.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// The innermost `keys` folded into one value (`heaplab_site_hash`).
pub fn site_hash(keys: &[u64]) -> u64 {
    if keys.is_empty() {
        return 0;
    }
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &k in keys {
        h ^= k;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    fmix(h)
}

/// The final mix of `heaplab_site_hash` (MurmurHash3's fmix64, half of it).
pub fn fmix(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h
}

/// The STACK+size key: the depth-k site hash combined with the requested
/// size (`hl_seg_size_key` in `native/segregate/segregated.c`).
pub fn size_key(site: u64, size: u64) -> u64 {
    fmix(site ^ size.wrapping_mul(0xC2B2_AE3D_27D4_EB4F) ^ 0x5bd1_e995)
}

/// The SP key: the stack depth in bytes, in 16-byte granules (the ABI keeps
/// the stack 16-byte aligned at every call), folded so it never collides with
/// 0 ("no stack pointer known").
pub fn sp_key(depth: u64) -> u64 {
    fmix((depth >> 4) ^ 0x5350_5350_5350_5350)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values printed by a C program that includes heaplab_site.h (the same
    /// inline functions the replayer and the allocator use).
    #[test]
    fn agrees_with_the_c_header() {
        assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
        let a = frame_key("/usr/bin/perl", 0xf6f96);
        let b = frame_key("", 0x1f_ff00_0598);
        let c = frame_key("libc.so.6", 0x2724a);
        assert_eq!(a, 0x3be35f32f1bcfe56);
        assert_eq!(a, frame_key("perl", 0xf6f96));
        assert_eq!(b, 0xfdd381277784365d);
        assert_eq!(c, 0x1e21079111f2ba71);
        assert_eq!(site_hash(&[a, b, c]), 0x2d1d2d0c3bbd2f2f);
        assert_eq!(site_hash(&[a]), 0xba94fb6287e1f9c8);
        assert_eq!(site_hash(&[]), 0);
        assert_ne!(site_hash(&[1, 2]), site_hash(&[2, 1]));
    }
}
