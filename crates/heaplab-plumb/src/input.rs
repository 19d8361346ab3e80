//! Input files that are pipes: `heaplab compare <(cat t.hltrace)`,
//! `... | heaplab sim -`, a FIFO.
//!
//! Most readers look at a file more than once (the magic bytes, then the
//! whole; the Rust reader, then the replayer, which opens it by name). A
//! pipe can be read once, and a FIFO blocks the second `open` for ever. So
//! every input that is a pipe, FIFO or socket is first copied whole into a
//! private scratch directory (mkdtemp, 0700), under its own file name, and
//! the copy is what the command reads; the copies go when the command ends.
//! So is `/dev/stdin` or `/dev/fd/N` even when it is a file: a child process
//! opening that name would get its own descriptor. A device or directory
//! given as an input is refused at once, with what it is: reading
//! `/dev/zero` as a trace never ends.
//!
//! ```text
//!   /dev/fd/63 (a pipe) ──copy──▶ $TMPDIR/heaplab-input-Xxxxxx/63 ──▶ readers
//!   t.hltrace (a file)  ─────────────────────────────────────────────▶ readers
//! ```

use crate::scratch::ScratchDir;
use anyhow::{bail, Context, Result};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

/// Inputs ready to be read as often as a reader likes.
#[derive(Debug)]
pub struct Inputs {
    /// The paths to read, in the order given.
    pub paths: Vec<PathBuf>,
    _spool: Option<ScratchDir>,
}

/// Whether `p` (following links, as `open` does) is a pipe, FIFO or socket.
pub fn is_stream(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| {
        let t = m.file_type();
        t.is_fifo() || t.is_socket()
    })
}

/// Copies every stream among `paths` into a private directory (see the
/// module docs); `-` is standard input. A device or directory is an error.
pub fn prepare(paths: &[PathBuf]) -> Result<Inputs> {
    let mut spool: Option<ScratchDir> = None;
    let mut out = Vec::with_capacity(paths.len());
    for (i, p) in paths.iter().enumerate() {
        let stdin = p.as_os_str() == "-";
        let m = if stdin { std::fs::metadata("/dev/stdin") } else { std::fs::metadata(p) };
        let Ok(m) = m else {
            out.push(p.clone()); // the reader names what is wrong
            continue;
        };
        let t = m.file_type();
        // /dev/stdin, /dev/fd/N name this process's descriptors: a child
        // (the replayer) would open its own, so they are copied too.
        let ours = stdin
            || ["/dev/stdin", "/dev/fd/", "/proc/self/fd/", "/dev/stdout"]
                .iter()
                .any(|pre| p.to_string_lossy().starts_with(pre));
        if t.is_file() && !ours {
            out.push(p.clone());
            continue;
        }
        if t.is_dir() {
            bail!("{}: a directory, not an input file", p.display());
        }
        if t.is_char_device() || t.is_block_device() {
            if stdin {
                bail!("standard input is a device: give the input as a file or a pipe");
            }
            bail!("{}: a device, not an input file (read it into a file first)", p.display());
        }
        // a pipe, FIFO, socket, or one of this process's descriptors
        if spool.is_none() {
            spool = Some(ScratchDir::new("input")?);
        }
        let dir = spool.as_ref().expect("made above");
        let name = if stdin {
            "stdin".to_string()
        } else {
            p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or("input".into())
        };
        // its own name where that is free (tables show it), else numbered
        let file = if dir.join(&name).exists() { format!("{i}-{name}") } else { name };
        let copy = dir.join(&file);
        let mut f = dir.create(&file)?;
        let n = if stdin || p.as_os_str() == "/dev/stdin" {
            std::io::copy(&mut std::io::stdin().lock(), &mut f)
        } else {
            let mut src =
                std::fs::File::open(p).with_context(|| format!("opening {}", p.display()))?;
            std::io::copy(&mut src, &mut f)
        }
        .with_context(|| format!("reading {}", p.display()))?;
        if n == 0 {
            bail!("{}: the pipe gave no bytes", p.display());
        }
        out.push(copy);
    }
    Ok(Inputs { paths: out, _spool: spool })
}

/// One input (see [`prepare`]).
pub fn prepare_one(p: &Path) -> Result<(PathBuf, Inputs)> {
    let i = prepare(&[p.to_path_buf()])?;
    Ok((i.paths[0].clone(), i))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_pass_devices_fail_fifos_are_copied() {
        let d = ScratchDir::new("input-test").unwrap();
        let f = d.join("t.txt");
        std::fs::write(&f, "abc").unwrap();
        let i = prepare(std::slice::from_ref(&f)).unwrap();
        assert_eq!(i.paths, vec![f.clone()]);
        let e = prepare(&[PathBuf::from("/dev/zero")]).unwrap_err().to_string();
        assert!(e.contains("a device"), "{e}");
        let fifo = d.fifo("p").unwrap();
        let w = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::write(fifo, "through a fifo").unwrap())
        };
        let i = prepare(std::slice::from_ref(&fifo)).unwrap();
        w.join().unwrap();
        assert_ne!(i.paths[0], fifo);
        assert_eq!(std::fs::read_to_string(&i.paths[0]).unwrap(), "through a fifo");
        // read twice: it is a file now
        assert_eq!(std::fs::read_to_string(&i.paths[0]).unwrap(), "through a fifo");
        let copy = i.paths[0].clone();
        drop(i);
        assert!(!copy.exists());
    }
}
