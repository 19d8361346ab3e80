//! Seeded synthetic streams for tests and benchmarks (not a workload model
//! to draw conclusions from).
//!
//! - [`uniform`]: addresses spread evenly over a span, every size, kind and
//!   part at random: the worst case for every fast path.
//! - [`heap_like`]: a small heap model with the structure of a recorded
//!   stream: objects allocated by a size-class free-list allocator with a
//!   16-byte header before each object, application accesses that revisit
//!   recently used objects field by field, stack traffic, and allocator
//!   accesses (free-list heads, headers, links inside freed blocks) marked
//!   [`Part::Allocator`].

use crate::access::{Access, Kind, Part};

/// SplitMix64: a tiny, seedable, good-enough generator.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (`n > 0`).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
    /// True with probability `p`.
    #[inline]
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64) < p
    }
}

/// `n` accesses at addresses uniform in `base..base + span`, sizes 1 to 64
/// (so some straddle lines and pages), every kind and part at random.
pub fn uniform(seed: u64, n: usize, base: u64, span: u64) -> Vec<Access> {
    let mut r = Rng::new(seed);
    (0..n)
        .map(|_| {
            let addr = base + r.below(span);
            let size = [1, 2, 4, 8, 8, 8, 16, 32, 64][r.below(9) as usize];
            let kind = Kind::ALL[r.below(4) as usize];
            let part = if r.chance(0.2) { Part::Allocator } else { Part::Application };
            Access { addr, size, kind, part }
        })
        .collect()
}

const HEAP: u64 = 0x5555_5555_0000;
const ALLOC_DATA: u64 = 0x7f12_3400_0000;
const STACK: u64 = 0x7ffd_8000_0000;

/// `n` accesses from a heap model (see the module docs). `live` bounds the
/// number of live objects (a few thousand gives a heap of a few hundred KB to
/// a few MB).
pub fn heap_like(seed: u64, n: usize, live: usize) -> Vec<Access> {
    let mut r = Rng::new(seed);
    let mut out = Vec::with_capacity(n + 64);
    // Free lists per 16-byte size class (up to 4 KiB), and a bump pointer.
    let mut free: Vec<Vec<u64>> = vec![Vec::new(); 257];
    let mut bump = HEAP;
    let mut objs: Vec<(u64, u32)> = Vec::new(); // (addr, size)
    let mut recent: Vec<usize> = Vec::new(); // indices into objs, most recent last
    let mut sp = STACK;
    let alloc_ref = |out: &mut Vec<Access>, addr: u64, size: u32, kind: Kind| {
        out.push(Access { addr, size, kind, part: Part::Allocator });
    };
    while out.len() < n {
        let roll = r.below(1000);
        if roll < 25 || objs.len() < 8 {
            // malloc: pick a size, pop a free list or bump.
            let size = match r.below(100) {
                0..=69 => 8 + 8 * r.below(8) as u32,
                70..=94 => 64 + 16 * r.below(28) as u32,
                _ => 512 + 64 * r.below(56) as u32,
            };
            let class = (size as usize).div_ceil(16);
            alloc_ref(&mut out, ALLOC_DATA + 8 * class as u64, 8, Kind::Read);
            let addr = match free[class].pop() {
                Some(a) => {
                    alloc_ref(&mut out, a, 8, Kind::Read); // next link
                    alloc_ref(&mut out, ALLOC_DATA + 8 * class as u64, 8, Kind::Write);
                    a
                }
                None => {
                    let a = bump + 16;
                    bump += 16 * class as u64 + 16;
                    alloc_ref(&mut out, ALLOC_DATA + 0x1000, 8, Kind::Write); // top
                    a
                }
            };
            alloc_ref(&mut out, addr - 8, 8, Kind::Write); // header
            objs.push((addr, size));
            recent.push(objs.len() - 1);
            // The program initialises the object.
            for off in (0..size.min(64)).step_by(8) {
                out.push(Access::new(addr + off as u64, 8, Kind::Write));
            }
            if objs.len() > live {
                // free an older object
                let i = r.below(objs.len() as u64 / 2) as usize;
                let (a, s) = objs.swap_remove(i);
                recent.retain(|&j| j != i && j != objs.len());
                let class = (s as usize).div_ceil(16);
                alloc_ref(&mut out, a - 8, 8, Kind::Read);
                alloc_ref(&mut out, ALLOC_DATA + 8 * class as u64, 8, Kind::Read);
                alloc_ref(&mut out, a, 8, Kind::Write);
                alloc_ref(&mut out, ALLOC_DATA + 8 * class as u64, 8, Kind::Write);
                free[class].push(a);
            }
            if recent.len() > 64 {
                recent.drain(..32);
            }
        } else if roll < 400 {
            // Stack traffic: a few words near the stack pointer.
            if r.chance(0.1) {
                sp = STACK - 64 * r.below(64);
            }
            let k = 1 + r.below(4);
            for _ in 0..k {
                let off = 8 * r.below(32);
                let kind = if r.chance(0.4) { Kind::Write } else { Kind::Read };
                out.push(Access::new(sp - off, 8, kind));
            }
        } else {
            // Touch an object: usually a recent one, field by field.
            let i = if !recent.is_empty() && r.chance(0.8) {
                let back = (r.below(recent.len() as u64) * r.below(recent.len() as u64))
                    / recent.len() as u64;
                recent[recent.len() - 1 - back as usize]
            } else {
                r.below(objs.len() as u64) as usize
            };
            let (a, s) = objs[i];
            let fields = 1 + r.below(6);
            let mut off = 8 * r.below((s as u64 / 8).max(1));
            for _ in 0..fields {
                if off + 8 > s as u64 {
                    off = 0;
                }
                let size = if r.chance(0.05) && off + 16 <= s as u64 { 16 } else { 8 };
                let kind = if r.chance(0.3) { Kind::Write } else { Kind::Read };
                out.push(Access::new(a + off, size, kind));
                off += size as u64;
            }
            if r.chance(0.3) {
                recent.push(i);
            }
        }
    }
    out.truncate(n);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_and_mixed() {
        let a = heap_like(7, 10_000, 500);
        assert_eq!(a, heap_like(7, 10_000, 500));
        assert_eq!(a.len(), 10_000);
        let alloc = a.iter().filter(|x| x.part == Part::Allocator).count();
        assert!(alloc > 100 && alloc < 5_000, "{alloc}");
        let u = uniform(1, 1000, 0, 1 << 20);
        assert!(u.iter().all(|x| x.addr < 1 << 20));
    }
}
