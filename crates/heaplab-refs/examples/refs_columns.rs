//! Column sizes of a trace's REFS blocks, raw and each zstd level 1 alone
//! (an analysis for the encoding's design, not a test):
//!   cargo run --release -p heaplab-refs --example refs_columns -- TRACE
use heaplab_trace::varint::Cursor;
fn main() {
    let path = std::env::args().nth(1).expect("TRACE");
    let mut r = heaplab_trace::TraceReader::open(&path).unwrap();
    r.keep_refs(true);
    let names = ["tags", "times", "objs", "offs", "addrs", "sizes", "counts"];
    let (mut raw, mut z, mut n, mut th) = ([0usize; 7], [0usize; 7], 0u64, [0u64; 9]);
    while let Some(it) = r.next_item().unwrap() {
        if let heaplab_trace::Item::Skipped { .. } = it {
            if let Some((_, p)) = r.take_refs() {
                let mut c = Cursor::new(&p);
                n += c.varint("n").unwrap();
                for _ in 0..4 {
                    c.varint("h").unwrap();
                }
                for i in 0..7 {
                    let col = c.bytes("col").unwrap();
                    raw[i] += col.len();
                    z[i] += zstd::bulk::compress(col, 1).unwrap().len();
                    if i == 1 {
                        let mut cc = Cursor::new(col);
                        while !cc.is_empty() {
                            th[cc.varint("t").unwrap().min(8) as usize] += 1;
                        }
                    }
                }
            }
        }
    }
    println!("{n} records");
    for i in 0..7 {
        println!(
            "{:<7} raw {:.3} B/rec  zstd1 {:.4} B/rec",
            names[i],
            raw[i] as f64 / n as f64,
            z[i] as f64 / n as f64
        );
    }
    println!("time deltas 0..7, 8+: {th:?}");
}
