//! `heaplab completions SHELL` and `heaplab man DIR`: generated from the
//! command's own clap definition (clap_complete, clap_mangen), so they never
//! drift from the flags. `make install` writes both into the installed tree.

use anyhow::{Context, Result};
use clap_complete::Shell;
use std::path::PathBuf;

/// Print a completion script for SHELL on stdout.
///
/// Examples:
///   heaplab completions bash > ~/.local/share/bash-completion/completions/heaplab
///   heaplab completions zsh > ~/.zfunc/_heaplab
#[derive(clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The shell.
    #[arg(value_enum)]
    shell: Shell,
}

pub fn run(a: Args) -> Result<i32> {
    let mut cmd = crate::command();
    clap_complete::generate(a.shell, &mut cmd, "heaplab", &mut std::io::stdout());
    Ok(0)
}

/// Write the man pages: heaplab.1, and heaplab-COMMAND.1 for each command.
///
/// Example:
///   heaplab man /usr/local/share/man/man1
#[derive(clap::Args)]
#[command(verbatim_doc_comment)]
pub struct ManArgs {
    /// The directory (made if needed).
    #[arg(value_name = "DIR")]
    dir: PathBuf,
}

pub fn man(a: ManArgs) -> Result<i32> {
    let cmd = crate::command();
    std::fs::create_dir_all(&a.dir).with_context(|| format!("creating {}", a.dir.display()))?;
    let mut pages = Vec::new();
    let mut page = |name: String, c: clap::Command| -> Result<()> {
        let mut buf = Vec::new();
        clap_mangen::Man::new(c).title(name.clone()).render(&mut buf)?;
        let p = a.dir.join(format!("{name}.1"));
        heaplab_plumb::output::write(&p, buf)?;
        pages.push(p);
        Ok(())
    };
    for sub in cmd.get_subcommands() {
        let name = format!("heaplab-{}", sub.get_name());
        let c = sub.clone().name(name.clone()).bin_name(format!("heaplab {}", sub.get_name()));
        page(name, c)?;
    }
    page("heaplab".into(), cmd)?;
    eprintln!("heaplab man: wrote {} pages in {}", pages.len(), a.dir.display());
    Ok(0)
}
