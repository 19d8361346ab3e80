//! SHA-256 of files, remembered per process by (path, size, mtime), so that
//! a trace many jobs read is hashed once per run. A file changed in the last
//! two seconds is not remembered: the kernel's timestamps move in steps of a
//! clock tick, so a file rewritten within one would keep its mtime (git's
//! "racy" files).

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

type Key = (PathBuf, u64, i64, i64);

static MEMO: Mutex<Option<HashMap<Key, String>>> = Mutex::new(None);

/// `sha256:HEX` of a file's content.
pub fn file(path: &Path) -> Result<String> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).with_context(|| format!("{}", path.display()))?;
    let key = (path.to_path_buf(), meta.size(), meta.mtime(), meta.mtime_nsec());
    if let Some(h) =
        MEMO.lock().expect("no panics under the lock").as_ref().and_then(|m| m.get(&key))
    {
        return Ok(h.clone());
    }
    let mut f = std::fs::File::open(path).with_context(|| format!("{}", path.display()))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    let hex = format!("sha256:{}", hex(&h.finalize()));
    let settled =
        meta.modified().ok().and_then(|m| m.elapsed().ok()).is_some_and(|a| a.as_secs() >= 2);
    if settled {
        MEMO.lock()
            .expect("no panics under the lock")
            .get_or_insert_with(HashMap::new)
            .insert(key, hex.clone());
    }
    Ok(hex)
}

/// SHA-256 of bytes, as hex.
pub fn bytes(b: &[u8]) -> String {
    hex(&Sha256::digest(b))
}

fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_digest_and_memo() {
        assert_eq!(
            bytes(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let t = heaplab_plumb::scratch::ScratchDir::new("jobs-hash").unwrap();
        let d = t.join("input");
        std::fs::write(&d, b"abc").unwrap();
        let h = file(&d).unwrap();
        assert_eq!(h, format!("sha256:{}", bytes(b"abc")));
        assert_eq!(file(&d).unwrap(), h);
    }
}
