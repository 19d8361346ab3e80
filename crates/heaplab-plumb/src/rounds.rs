//! The order of one round of interleaved runs.
//!
//! A study that times several variants runs them round by round, one of
//! each per round, so that a machine that slows down or speeds up during the
//! study slows every variant alike. In a fixed order each variant would also
//! always follow the same neighbour (its page cache, its CPU frequency, the
//! heat it leaves): a bias that repeats every round and that no number of
//! rounds averages out. So round `r` starts at variant `r mod n`: over `n`
//! rounds each variant runs once in each position. Round 0 is in the given
//! order (a reference run, glibc's, may need to come first once).

/// The variants' indices in the order round `round` runs them.
pub fn order(n: usize, round: usize) -> impl Iterator<Item = usize> {
    (0..n).map(move |k| (k + round) % n.max(1))
}

#[cfg(test)]
mod tests {
    use super::order;

    #[test]
    fn every_variant_takes_every_position_once_in_n_rounds() {
        for n in 1..7 {
            assert_eq!(order(n, 0).collect::<Vec<_>>(), (0..n).collect::<Vec<_>>());
            let mut seen = vec![vec![0u32; n]; n]; // [variant][position]
            for r in 0..n {
                let round: Vec<usize> = order(n, r).collect();
                let mut sorted = round.clone();
                sorted.sort();
                assert_eq!(sorted, (0..n).collect::<Vec<_>>(), "round {r} runs each once");
                for (pos, v) in round.into_iter().enumerate() {
                    seen[v][pos] += 1;
                }
            }
            assert!(seen.iter().flatten().all(|&c| c == 1), "n = {n}: {seen:?}");
        }
        assert_eq!(order(0, 3).count(), 0);
    }
}
