//! The conventions every command shares:
//!
//! - `--json [FILE]` (and `compare`'s `--csv [FILE]`): with no FILE, or `-`,
//!   standard output; the command's text then goes to stderr or is left out;
//! - `-o/--output` for a command's main output, `--report DIR` for report.html;
//! - every file written through `heaplab_plumb::output` (a temporary name,
//!   then rename; never through a symbolic link unless `--force`);
//! - every input that is a pipe or FIFO copied to a private file first
//!   (`heaplab_plumb::input`).

use anyhow::{bail, Result};
pub use heaplab_plumb::output::Dest;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

fn is_trace(p: &Path) -> bool {
    let mut m = [0u8; 8];
    std::fs::File::open(p).and_then(|mut f| f.read_exact(&mut m)).is_ok()
        && m == heaplab_trace::format::FILE_MAGIC
}

/// The destination of `--FLAG [FILE]`. A FILE that is one of the inputs, or
/// an existing heaplab trace, is refused: clap took an input for the flag's
/// value (`heaplab stats --json a.hltrace b.hltrace`).
pub fn dest(flag: &str, v: &Option<PathBuf>, inputs: &[PathBuf]) -> Result<Option<Dest>> {
    let Some(p) = v else { return Ok(None) };
    let d = Dest::parse(p.as_os_str());
    if let Dest::File(f) = &d {
        let same = |a: &Path| {
            a == f.as_path()
                || matches!((a.canonicalize(), f.canonicalize()), (Ok(x), Ok(y)) if x == y)
        };
        if inputs.iter().any(|i| same(i)) || is_trace(f) {
            bail!(
                "--{flag} {}: that is an input, not where to write; put --{flag} after the \
                 inputs (for standard output) or give it a new file name",
                f.display()
            );
        }
    }
    Ok(Some(d))
}

/// Where a command's text goes: standard output, or stderr when standard
/// output carries JSON or CSV.
pub fn text(stdout_taken: bool) -> Box<dyn Write> {
    if stdout_taken {
        Box::new(std::io::stderr())
    } else {
        Box::new(std::io::stdout())
    }
}

/// Whether any of these outputs is standard output.
pub fn any_stdout(d: &[&Option<Dest>]) -> bool {
    d.iter().any(|x| x.as_ref().is_some_and(Dest::is_stdout))
}

/// Writes `report.html` into `dir` (made if needed) and returns its path.
pub fn write_report(dir: &Path, html: &str) -> Result<PathBuf> {
    let path = dir.join("report.html");
    heaplab_plumb::output::write(&path, html)?;
    Ok(path)
}
