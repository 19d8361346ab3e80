//! The real program under callgrind with each library, and nothing else (no
//! wall-time runs): `heaplab segregate --run-test`'s instruction figures
//! (`runtime::costs`) for libraries already built.
//!
//! ```sh
//! cargo run --release -p heaplab-segregate --example seg-costs -- \
//!     'CMD' CWD SCRATCH DEFAULT=path/libdefault.so SP=path/libsp.so ...
//! ```
use heaplab_plumb::cmdline::CommandLine;
use heaplab_segregate::runtime;
use std::path::PathBuf;

fn main() -> anyhow::Result<()> {
    let a: Vec<String> = std::env::args().skip(1).collect();
    anyhow::ensure!(a.len() >= 4, "usage: seg-costs 'CMD' CWD SCRATCH NAME=LIB ...");
    let cmd = CommandLine::parse(&a[0])?;
    let cwd = PathBuf::from(&a[1]);
    let scratch = PathBuf::from(&a[2]);
    std::fs::create_dir_all(&scratch)?;
    let libs: Vec<(String, PathBuf)> = a[3..]
        .iter()
        .map(|s| {
            let (n, p) = s.split_once('=').ok_or_else(|| {
                anyhow::anyhow!("{s:?}: expected NAME=LIB (e.g. SP=out/seg/libsp.so)")
            })?;
            Ok((n.to_string(), PathBuf::from(p)))
        })
        .collect::<anyhow::Result<_>>()?;
    let c = runtime::costs(&cmd, &cwd, &libs, &scratch, &mut |m| eprintln!("{m}"))?;
    let d = c.default.per_malloc;
    println!(
        "{:<12} {:>10} {:>12} {:>10} {:>12} {:>10} {:>12}",
        "library", "mallocs", "instr/malloc", "xDEFAULT", "instr/free", "ident/obj", "program Ir"
    );
    for r in std::iter::once(&c.default).chain(c.predictors.iter()) {
        println!(
            "{:<12} {:>10} {:>12.1} {:>10.2} {:>12.1} {:>10} {:>12}",
            r.name,
            r.mallocs,
            r.per_malloc,
            r.per_malloc / d,
            r.per_free,
            r.identify_per_object.map_or("-".into(), |i| format!("{i:.1}")),
            r.program_instructions
        );
    }
    Ok(())
}
