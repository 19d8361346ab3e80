//! Numbers for people come from heaplab-report (`heaplab_report::human`),
//! so the terminal and the pages show them alike; text from files is made
//! safe for a terminal here.

pub use heaplab_report::human::{bytes, count, ns, pct};

/// Text for the terminal: control characters and bytes that are not UTF-8
/// escaped (`heaplab_trace::escape::terminal`).
pub fn escaped(s: &str) -> String {
    heaplab_trace::escape::terminal_str(s)
}
