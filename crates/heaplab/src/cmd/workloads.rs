//! `heaplab workloads`: the bundled workloads, their generated inputs and
//! command lines.

use crate::workloads::{self, ALL};
use anyhow::{Context, Result};
use std::path::PathBuf;
use std::process::Command;

/// List the bundled workloads, or prepare one and show or run its command.
#[derive(clap::Args)]
pub struct Args {
    /// A workload to prepare (see the list without arguments).
    name: Option<String>,
    /// Input variant: 1, 2 or 3 (training, threshold and test inputs).
    #[arg(long, default_value_t = 1)]
    variant: u32,
    /// Input size relative to the default.
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// Where generated inputs are cached.
    #[arg(long, default_value = "out/inputs")]
    cache: PathBuf,
    /// Run the workload natively (its exit status is passed through) instead
    /// of printing its command line.
    #[arg(long)]
    run: bool,
}

fn shell_quote(s: &str) -> String {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+".contains(&b)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

pub fn run(a: Args) -> Result<i32> {
    let Some(name) = &a.name else {
        for w in ALL {
            println!("{:<10} {:<8} {}", w.name, w.program, w.about);
        }
        return Ok(0);
    };
    let w = workloads::find(name)?;
    let p = w.prepare(&a.cache, a.variant, a.scale)?;
    if a.run {
        let mut cmd = Command::new(&p.argv[0]);
        cmd.args(&p.argv[1..]).envs(p.env.iter().cloned());
        if let Some(i) = &p.stdin {
            cmd.stdin(std::fs::File::open(i).with_context(|| format!("opening {}", i.display()))?);
        }
        let st = cmd.status().with_context(|| format!("starting {}", p.argv[0]))?;
        return Ok(st.code().unwrap_or(128));
    }
    let mut line: Vec<String> =
        p.env.iter().map(|(k, v)| format!("{k}={}", shell_quote(v))).collect();
    line.extend(p.argv.iter().map(|s| shell_quote(s)));
    if let Some(i) = &p.stdin {
        line.push(format!("< {}", shell_quote(&i.display().to_string())));
    }
    println!("{}", line.join(" "));
    Ok(0)
}
