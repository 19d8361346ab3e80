//! The shared test vectors: the Rust side of the contract with the C reader
//! and writer (`native/common`), which run the same checks.

use heaplab_trace::dump::{run_script, write_dump};
use heaplab_trace::TraceReader;
use std::fs;
use std::path::PathBuf;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/vectors")
}

fn names(suffix: &str) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir())
        .unwrap()
        .filter_map(|e| {
            e.unwrap().file_name().to_str().and_then(|n| n.strip_suffix(suffix)).map(String::from)
        })
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no *{suffix} vectors");
    v
}

fn dump(path: &PathBuf) -> (String, Option<String>) {
    let mut r = TraceReader::open(path).unwrap();
    let mut out = Vec::new();
    let err = write_dump(&mut r, &mut out).err().map(|e| e.to_string());
    (String::from_utf8(out).unwrap(), err)
}

#[test]
fn scripts_rebuild_the_committed_bytes() {
    for n in names(".script.txt") {
        let script = fs::read_to_string(dir().join(format!("{n}.script.txt"))).unwrap();
        let built = run_script(&script).unwrap();
        let committed = fs::read(dir().join(format!("{n}.hltrace"))).unwrap();
        assert!(built == committed, "{n}: the writer no longer produces the committed vector");
    }
}

#[test]
fn dumps_match_the_hand_written_scripts() {
    for n in names(".script.txt") {
        let script = fs::read_to_string(dir().join(format!("{n}.script.txt"))).unwrap();
        let expected: String = script
            .lines()
            .filter(|l| {
                !(l.starts_with("writer") || l.starts_with("flush") || l.starts_with("raw_block"))
            })
            .map(|l| format!("{l}\n"))
            .collect();
        let (got, err) = dump(&dir().join(format!("{n}.hltrace")));
        assert_eq!(err, None, "{n}");
        assert_eq!(got, expected, "{n}: the reader disagrees with the script");
        assert_eq!(
            got,
            fs::read_to_string(dir().join(format!("{n}.txt"))).unwrap(),
            "{n}.txt is stale"
        );
    }
}

/// Every good vector (a `.txt` beside it, no `.err`), of either version,
/// dumps to its `.txt`: the version-2 ones are written by the C tool
/// (`NAME.cscript.txt`), so this is where the two readers meet on them.
#[test]
fn every_good_vector_dumps_to_its_text() {
    let mut checked = 0;
    for n in names(".hltrace") {
        let txt = dir().join(format!("{n}.txt"));
        if dir().join(format!("{n}.err")).exists() || !txt.exists() {
            continue;
        }
        let (got, err) = dump(&dir().join(format!("{n}.hltrace")));
        assert_eq!(err, None, "{n}");
        assert_eq!(got, fs::read_to_string(&txt).unwrap(), "{n}");
        checked += 1;
    }
    assert!(checked >= 8, "only {checked} good vectors");
}

#[test]
fn compressed_vector_reads_like_the_stored_one() {
    let (z, err) = dump(&dir().join("basic-zstd.hltrace"));
    assert_eq!(err, None);
    assert_eq!(z, fs::read_to_string(dir().join("basic.txt")).unwrap());
}

#[test]
fn the_zstd_vector_really_holds_compressed_blocks() {
    use heaplab_trace::block::BlockHeader;
    let b = fs::read(dir().join("many-zstd.hltrace")).unwrap();
    let mut at = 16;
    let mut zstd_blocks = 0;
    while at < b.len() {
        let h = BlockHeader::parse(b[at..at + 24].try_into().unwrap());
        zstd_blocks += usize::from(h.codec == 1);
        at += 24 + h.stored_len as usize;
    }
    assert!(zstd_blocks >= 2, "{zstd_blocks}");
}

#[test]
fn bad_vectors_give_the_expected_error() {
    for n in names(".err") {
        let spec = fs::read_to_string(dir().join(format!("{n}.err"))).unwrap();
        let field =
            |k: &str| spec.split_whitespace().find_map(|w| w.strip_prefix(k)).unwrap().to_string();
        let phrase = spec.split_once("problem=").unwrap().1.trim().to_string();
        let path = dir().join(format!("{n}.hltrace"));
        let e = match TraceReader::open(&path) {
            Err(e) => e,
            Ok(mut r) => loop {
                match r.next_event() {
                    Ok(Some(_)) => {}
                    Ok(None) => panic!("{n}: read without error"),
                    Err(e) => break e,
                }
            },
        };
        let msg = e.to_string();
        assert!(msg.contains(&phrase), "{n}: {msg}");
        assert!(
            msg.starts_with(&path.display().to_string()),
            "{n}: message must name the file: {msg}"
        );
        assert_eq!(e.offset.to_string(), field("offset="), "{n}: {msg}");
        assert_eq!(e.events_read.to_string(), field("events="), "{n}: {msg}");
        // what comes out before the error: a bad block gives none of its items
        let prefix = dir().join(format!("{n}.txt"));
        if prefix.exists() {
            let (got, err) = dump(&path);
            assert!(err.is_some(), "{n}");
            assert_eq!(got, fs::read_to_string(prefix).unwrap(), "{n}: before the error");
        }
    }
}
