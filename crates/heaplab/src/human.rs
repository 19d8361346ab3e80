//! Numbers for people: thousands separators, byte sizes, durations; and
//! text from files, made safe for a terminal.

/// Text for the terminal: control characters and bytes that are not UTF-8
/// escaped (`heaplab_trace::escape::terminal`).
pub fn escaped(s: &str) -> String {
    heaplab_trace::escape::terminal_str(s)
}

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
    #[test]
    fn formats() {
        assert_eq!(super::count(0), "0");
        assert_eq!(super::count(1234567), "1,234,567");
        assert_eq!(super::count(100), "100");
        assert_eq!(super::bytes(512), "512 B");
        assert_eq!(super::bytes(1536), "1.5 KiB");
        assert_eq!(super::ns(1_500_000), "1.50 ms");
    }
}
