//! Numbers in tables: counts shown short, millions.

/// A count in at most five or six characters: 4321, 12.3K, 1.50M, 12.35e9.
pub fn short_count(n: u64) -> String {
    if n >= 10_000_000_000 {
        format!("{:.2}e9", n as f64 / 1e9)
    } else if n >= 1_000_000 {
        format!("{:.2}M", n as f64 / 1e6)
    } else if n >= 10_000 {
        format!("{:.1}K", n as f64 / 1e3)
    } else {
        n.to_string()
    }
}

/// `n` in millions with two decimals: 1234567 → "1.23".
pub fn millions(n: u64) -> String {
    format!("{:.2}", n as f64 / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_short() {
        assert_eq!(short_count(9_999), "9999");
        assert_eq!(short_count(10_000), "10.0K");
        assert_eq!(short_count(1_500_000), "1.50M");
        assert_eq!(short_count(12_345_000_000), "12.35e9");
        assert_eq!(millions(1_234_567), "1.23");
    }
}
