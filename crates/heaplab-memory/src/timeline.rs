//! Live bytes over time, for the whole program and per call stack, in one
//! pass and bounded memory.
//!
//! ```text
//!   time ─▶ |  b0  |  b1  |  b2  | ... | b(cap-1) |     width ns each, a power of two
//!   whole program: (max, last) live bytes per bucket
//!   per stack:     sparse [(bucket, live bytes at the bucket's end)], appended
//!                  only when the stack's live bytes change in a new bucket
//!
//!   an event past the last bucket, or more than `max_entries` sparse entries:
//!   width doubles and neighbouring buckets merge (max of maxes, the later
//!   last value), so the series always spans the whole run in ≤ cap buckets.
//! ```
//!
//! Invariant: a stack's value in bucket b is the value of its last entry at
//! or before b (0 before its first); the sum over stacks at the end of a
//! bucket is the live bytes then.

#[derive(Debug, Clone)]
pub struct Timeline {
    t0: Option<u64>,
    width: u64,
    cap: usize,
    max_entries: usize,
    global: Vec<(u64, u64)>,
    per: Vec<Vec<(u32, u64)>>,
    entries: usize,
}

/// One bucket of the whole program's series.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Point {
    /// Nanoseconds from the first event to the bucket's end.
    pub t_ns: u64,
    /// The most live bytes at any moment of the bucket.
    pub max: u64,
    /// Live bytes at the bucket's end.
    pub last: u64,
}

impl Timeline {
    /// At most `cap` buckets (at least 2) and `max_entries` per-stack entries.
    pub fn new(cap: usize, max_entries: usize) -> Timeline {
        Timeline {
            t0: None,
            width: 1,
            cap: cap.max(2),
            max_entries: max_entries.max(cap),
            global: Vec::new(),
            per: Vec::new(),
            entries: 0,
        }
    }

    fn coarsen(&mut self) {
        self.width = self.width.saturating_mul(2);
        let g = std::mem::take(&mut self.global);
        self.global = g
            .chunks(2)
            .map(|c| {
                let max = c.iter().map(|x| x.0).max().unwrap_or(0);
                (max, c[c.len() - 1].1)
            })
            .collect();
        self.entries = 0;
        for s in &mut self.per {
            let mut out: Vec<(u32, u64)> = Vec::with_capacity(s.len());
            for &(b, v) in s.iter() {
                let b = b / 2;
                match out.last_mut() {
                    Some(l) if l.0 == b => l.1 = v,
                    _ => out.push((b, v)),
                }
            }
            self.entries += out.len();
            *s = out;
        }
    }

    /// The bucket of time `t_ns` (coarsening when needed).
    pub fn bucket(&mut self, t_ns: u64) -> u32 {
        let t0 = *self.t0.get_or_insert(t_ns);
        let d = t_ns.saturating_sub(t0);
        while (d / self.width) as usize >= self.cap {
            self.coarsen();
        }
        (d / self.width) as u32
    }

    /// The whole program has `live` bytes in bucket `b`.
    pub fn set_global(&mut self, b: u32, live: u64) {
        let b = b as usize;
        if self.global.len() <= b {
            let prev = self.global.last().map_or(0, |x| x.1);
            self.global.resize(b + 1, (prev, prev));
        }
        let g = &mut self.global[b];
        g.0 = g.0.max(live);
        g.1 = live;
    }

    /// Stack `s` has `live` bytes at the end of bucket `b` (so far).
    pub fn set_stack(&mut self, b: u32, s: u32, live: u64) {
        let s = s as usize;
        if self.per.len() <= s {
            self.per.resize(s + 1, Vec::new());
        }
        let v = &mut self.per[s];
        match v.last_mut() {
            Some(l) if l.0 == b => l.1 = live,
            _ => {
                v.push((b, live));
                self.entries += 1;
                if self.entries > self.max_entries {
                    self.coarsen();
                }
            }
        }
    }

    /// Nanoseconds per bucket.
    pub fn width_ns(&self) -> u64 {
        self.width
    }

    /// The whole program's series.
    pub fn points(&self) -> Vec<Point> {
        self.global
            .iter()
            .enumerate()
            .map(|(i, &(max, last))| Point {
                t_ns: (i as u64 + 1).saturating_mul(self.width),
                max,
                last,
            })
            .collect()
    }

    /// The summed live bytes of `stacks` at the end of each bucket.
    pub fn sum_of(&self, stacks: &[u32]) -> Vec<u64> {
        let n = self.global.len();
        let mut out = vec![0u64; n];
        for &s in stacks {
            let Some(v) = self.per.get(s as usize) else { continue };
            let mut cur = 0u64;
            let mut it = v.iter().peekable();
            for (b, o) in out.iter_mut().enumerate() {
                while let Some(&&(eb, ev)) = it.peek() {
                    if eb as usize <= b {
                        cur = ev;
                        it.next();
                    } else {
                        break;
                    }
                }
                *o += cur;
            }
        }
        out
    }

    /// The value of each stack at the end of bucket `b`: (stack, bytes), non-zero only.
    pub fn stacks_at(&self, b: usize) -> Vec<(u32, u64)> {
        let mut out = Vec::new();
        for (s, v) in self.per.iter().enumerate() {
            let i = v.partition_point(|e| (e.0 as usize) <= b);
            if i > 0 && v[i - 1].1 > 0 {
                out.push((s as u32, v[i - 1].1));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coarsening_keeps_the_peak_and_the_sums() {
        let mut t = Timeline::new(4, 1000);
        let mut live = [0u64; 2];
        for i in 0..100u64 {
            let b = t.bucket(i * 10);
            let s = (i % 2) as u32;
            live[s as usize] = i;
            t.set_stack(b, s, i);
            t.set_global(b, live[0] + live[1]);
        }
        let p = t.points();
        assert!(p.len() <= 4);
        assert_eq!(p.iter().map(|x| x.max).max(), Some(99 + 98));
        assert_eq!(p.last().unwrap().last, 99 + 98);
        let sums = t.sum_of(&[0, 1]);
        assert_eq!(*sums.last().unwrap(), 99 + 98);
        assert_eq!(t.stacks_at(p.len() - 1), vec![(0, 98), (1, 99)]);
    }
}
