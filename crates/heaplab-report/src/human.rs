//! Numbers for people, the same in a terminal and in a page: thousands
//! separators, byte sizes with binary units, durations, shares.

/// 1234567 → "1,234,567".
pub fn count(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A signed count: "+1,234", "-12", "0".
pub fn signed(n: i128) -> String {
    let m = count(n.unsigned_abs().min(u128::from(u64::MAX)) as u64);
    match n.signum() {
        1 => format!("+{m}"),
        -1 => format!("-{m}"),
        _ => m,
    }
}

/// Bytes with a binary unit: "512 B", "1.5 KiB", "12.0 MiB".
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// A signed byte difference: "+1.5 KiB", "-512 B", "0 B".
pub fn signed_bytes(n: i128) -> String {
    let m = bytes(n.unsigned_abs().min(u128::from(u64::MAX)) as u64);
    match n.signum() {
        1 => format!("+{m}"),
        -1 => format!("-{m}"),
        _ => m,
    }
}

/// Nanoseconds as "850 ns", "12.3 µs", "4.56 ms", "1.23 s".
pub fn ns(n: u64) -> String {
    let v = n as f64;
    if n < 1_000 {
        format!("{n} ns")
    } else if n < 1_000_000 {
        format!("{:.1} µs", v / 1e3)
    } else if n < 1_000_000_000 {
        format!("{:.2} ms", v / 1e6)
    } else {
        format!("{:.2} s", v / 1e9)
    }
}

/// A share as a percentage with one decimal.
pub fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(count(0), "0");
        assert_eq!(count(1234567), "1,234,567");
        assert_eq!(count(100), "100");
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(ns(1_500_000), "1.50 ms");
        assert_eq!(signed(-1234), "-1,234");
        assert_eq!(signed_bytes(2048), "+2.0 KiB");
        assert_eq!(pct(0.125), "12.5%");
    }
}
