//! Writes the seed corpus of every fuzz target into `fuzz/corpus/`, from
//! the shared test vectors and small hand-made inputs:
//!
//! ```text
//! cargo run --manifest-path fuzz/Cargo.toml --example seeds
//! ```
//!
//! Each seed starts with the target's mode byte (see `src/lib.rs`).

use heaplab_trace::refs::RefsEncoder;
use std::fs;
use std::path::Path;

fn put(dir: &Path, name: &str, mode: u8, body: &[u8]) {
    fs::create_dir_all(dir).unwrap();
    let mut b = vec![mode];
    b.extend_from_slice(body);
    fs::write(dir.join(name), b).unwrap();
}

fn main() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let vectors = here.join("../testdata/vectors");
    let corpus = here.join("corpus");
    // Rewrite the seeds; keep the regress-* inputs (each once crashed a reader).
    for t in fs::read_dir(&corpus).into_iter().flatten().flatten() {
        for f in fs::read_dir(t.path()).into_iter().flatten().flatten() {
            if !f.file_name().to_string_lossy().starts_with("regress-") {
                let _ = fs::remove_file(f.path());
            }
        }
    }
    let mut names: Vec<_> = fs::read_dir(&vectors).unwrap().map(|e| e.unwrap().path()).collect();
    names.sort();
    for p in &names {
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        let bytes = fs::read(p).unwrap();
        if name.ends_with(".hltrace") {
            // as is, and with checksums repaired after mutation (mode bit 0)
            put(&corpus.join("trace_reader"), &format!("{name}.raw"), 0, &bytes);
            put(&corpus.join("trace_reader"), &format!("{name}.fix"), 1, &bytes);
        } else if name.ends_with(".txt") {
            put(&corpus.join("text_reader"), &format!("{name}.dump"), 2, &bytes);
        }
    }

    // REFS payloads: n mallocs, then references to them and to other memory.
    for (i, (n, refs)) in [(1u8, 3u64), (4, 40), (16, 400), (0, 10)].into_iter().enumerate() {
        let mut enc = RefsEncoder::new();
        let mut t = 10;
        if n > 0 {
            enc.events(u64::from(n), u64::from(n), t);
        }
        for k in 0..refs {
            t += 1 + k % 7;
            if n > 0 && k % 3 != 0 {
                enc.heap(
                    k % u64::from(n),
                    (k * 8) % 64,
                    [1, 2, 4, 8][(k % 4) as usize],
                    k % 2 == 0,
                    t,
                );
            } else {
                enc.other(0x7ffd_0000 + k * 16, 8, k % 5 == 0, t);
            }
        }
        enc.end(t + 100);
        let payload = enc.take_block().unwrap_or_default();
        put(&corpus.join("refs_decoder"), &format!("refs-{i}"), n, &payload);
    }

    // Course traces, as the drivers write them (mode 0 .rep, 1 .script).
    let text = corpus.join("text_reader");
    put(
        &text,
        "csapp.rep",
        0,
        b"20000\n3\n8\n1\na 0 512\na 1 128\nr 0 640\na 2 128\nf 1\nr 0 768\nf 0\nf 2\n",
    );
    put(&text, "15213-2016.rep", 0, b"1\n2\n6\n0\na 0 16\nf -1\na 1 32\nr 0 0\nf 1\nf 0\n");
    put(&text, "15213-2022.rep", 0, b"3\n4\n5\n96\na 0 24\na 3\nr 3 40\nf 0\nf 3\n");
    put(&text, "one-line-header.rep", 0, b"20000 1 2 1\na 0 5\nf 0\n");
    put(&text, "more-ops.rep", 0, b"0 2 1 0\na 0 8\nf 0\na 1 9\n");
    put(
        &text,
        "comments.script",
        1,
        b"# a script\na 0 10   # trailing\n\nalloc 1 20\nf 0#x\nr 1 30\nf 1\n",
    );

    // din text (mode bit 0: simulate instruction fetches).
    let din = corpus.join("din_reader");
    put(
        &din,
        "basic.din",
        0,
        b"0 1000\n1 1004 4\n2 401000\n0 2000 8 alloc\n4 0\n3 0x7ffd1230 16 app # c\n",
    );
    put(&din, "fetches.din", 1, b"2 401000\n2 401004 4\n0 deadbeef 4096 allocator\n# only a comment\n\n1 0xffffffffffffffff 8\n");
    let mut many = String::new();
    for i in 0..2000u64 {
        many.push_str(&format!(
            "{} {:x} {}\n",
            i % 3,
            0x10000 + (i * 2654435761) % 0x100000,
            1 << (i % 4)
        ));
    }
    put(&din, "many.din", 0, many.as_bytes());
    println!("wrote {}", corpus.display());
}
