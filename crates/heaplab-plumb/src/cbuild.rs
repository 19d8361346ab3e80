//! Compiling C the way the zoo is compiled: what `heaplab synth` and
//! `heaplab segregate` build at run time, against the zoo's sources.
//!
//! ```text
//!   make ── native/Makefile ──▶ build/zoo-cflags.txt   (ALLOC_CFLAGS less its -I,
//!                                                       one flag per line)
//!   CBuild::zoo(layout) reads it, adds -I native/common -I native/alloc
//!        ├─ compile(units, 2 at a time) ── cc FLAGS EXTRA -c SRC -o OBJ
//!        └─ link_shared(so, objects, libs) ── cc -shared -Wl,-z,now -Wl,--no-undefined
//! ```
//!
//! The flags exist in one place, the Makefile; every command run is kept
//! (`commands`) so that a study can say how its library was built, and a
//! failed command's error shows the command and the compiler's output.

use crate::layout::Layout;
use crate::process::{self, show};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// One translation unit.
#[derive(Debug, Clone)]
pub struct Unit {
    pub src: PathBuf,
    pub obj: PathBuf,
    /// Flags for this unit only (`-DHL_ALLOC_SYM=...`).
    pub extra: Vec<String>,
}

/// A C compiler set up with the zoo's flags.
#[derive(Debug, Clone)]
pub struct CBuild {
    /// `$CC`, else gcc.
    pub cc: String,
    /// The C sources of the tree (`native/`).
    pub native: PathBuf,
    flags: Vec<String>,
    includes: Vec<PathBuf>,
    /// Every command run, as a line.
    pub commands: Vec<String>,
}

/// Reads a flags file: one flag per line, `#` comments and blank lines ignored.
pub fn read_flags(path: &Path, hint: &str) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{} is missing: {hint}", path.display()))?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect())
}

impl CBuild {
    /// The zoo's flags and include directories, from `layout`.
    pub fn zoo(layout: &Layout) -> Result<CBuild> {
        let flags = read_flags(&layout.zoo_cflags, layout.build_hint())?;
        if flags.is_empty() {
            bail!("{} holds no flags", layout.zoo_cflags.display());
        }
        let cc = std::env::var("CC").ok().filter(|c| !c.trim().is_empty()).unwrap_or("gcc".into());
        Ok(CBuild {
            cc,
            native: layout.native.clone(),
            flags,
            includes: vec![layout.native.join("common"), layout.native.join("alloc")],
            commands: Vec::new(),
        })
    }

    /// Adds an include directory.
    pub fn include(&mut self, dir: impl Into<PathBuf>) {
        self.includes.push(dir.into());
    }

    /// The flags every unit gets (the zoo's, then `-I` for each include).
    pub fn flags(&self) -> Vec<String> {
        let mut f = self.flags.clone();
        f.extend(self.includes.iter().map(|d| format!("-I{}", d.display())));
        f
    }

    /// Fails, naming the first missing one, unless every `native/`-relative
    /// file exists (`who` says which command needs them).
    pub fn require(&self, files: &[&str], who: &str) -> Result<()> {
        for f in files {
            let p = self.native.join(f);
            if !p.exists() {
                bail!(
                    "{} is missing: {who} builds with the sources of native/ (set HEAPLAB_HOME \
                     to a heaplab checkout or install prefix)",
                    p.display()
                );
            }
        }
        Ok(())
    }

    fn compile_cmd(&self, u: &Unit) -> Command {
        let mut c = Command::new(&self.cc);
        c.args(self.flags()).args(&u.extra).arg("-c").arg(&u.src).arg("-o").arg(&u.obj);
        c
    }

    /// Compiles the units, `parallel` at a time (the machine may be shared).
    pub fn compile(&mut self, units: &[Unit], parallel: usize) -> Result<()> {
        let mut running: Vec<(Child, String)> = Vec::new();
        for u in units {
            if let Some(d) = u.obj.parent() {
                std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
            }
            let mut c = self.compile_cmd(u);
            let shown = show(&c);
            running.push((spawn(&mut c)?, shown.clone()));
            self.commands.push(shown);
            if running.len() >= parallel.max(1) {
                let (ch, sh) = running.remove(0);
                finish(ch, &sh)?;
            }
        }
        for (ch, sh) in running {
            finish(ch, &sh)?;
        }
        Ok(())
    }

    /// Links `objects` (and `libs`, e.g. `-ldl`) into a shared object that
    /// resolves every symbol at load time.
    pub fn link_shared(&mut self, so: &Path, objects: &[PathBuf], libs: &[&str]) -> Result<()> {
        let mut link = Command::new(&self.cc);
        link.args(["-shared", "-Wl,-z,now", "-Wl,--no-undefined", "-o"])
            .arg(so)
            .args(objects)
            .args(libs);
        self.run(link)
    }

    /// Runs a build command (ld, objcopy, ar, ...), keeping it in `commands`.
    pub fn run(&mut self, mut cmd: Command) -> Result<()> {
        let shown = show(&cmd);
        finish(spawn(&mut cmd)?, &shown)?;
        self.commands.push(shown);
        Ok(())
    }
}

fn spawn(cmd: &mut Command) -> Result<Child> {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.spawn().with_context(|| format!("cannot run {}", cmd.get_program().to_string_lossy()))
}

fn finish(child: Child, shown: &str) -> Result<()> {
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!(
            "the build failed ({}):\n  {shown}\n{}{}",
            process::Ended::from_status(out.status).describe(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_come_from_the_file_make_writes() {
        // A check that cannot run fails unless skipped by name (scripts/skips.sh).
        let allowed = std::env::var("HEAPLAB_ALLOW_SKIPS")
            .is_ok_and(|v| v.split(',').any(|n| n == "zoo-build"));
        let l = match Layout::discover() {
            Ok(l) if l.zoo_cflags.exists() => l,
            _ if allowed => {
                eprintln!("SKIP zoo-build: no built tree (allowed by HEAPLAB_ALLOW_SKIPS)");
                return;
            }
            _ => panic!(
                "no built tree with build/zoo-cflags.txt (run `make native`); \
                 HEAPLAB_ALLOW_SKIPS=zoo-build skips this on purpose"
            ),
        };
        let b = CBuild::zoo(&l).unwrap();
        let f = b.flags();
        for want in ["-fvisibility=hidden", "-Werror", "-fPIC", "-ftls-model=initial-exec"] {
            assert!(f.iter().any(|x| x == want), "{want} missing from {f:?}");
        }
        assert!(f.iter().any(|x| x.starts_with("-I") && x.ends_with("native/alloc")), "{f:?}");
    }

    #[test]
    fn a_failed_command_shows_itself_and_the_compilers_words() {
        let d = crate::scratch::ScratchDir::new("cbuild-test").unwrap();
        let mut b = CBuild {
            cc: "gcc".into(),
            native: d.dir.clone(),
            flags: vec!["-O1".into()],
            includes: vec![],
            commands: vec![],
        };
        std::fs::write(d.join("bad.c"), "int f(void) { return nope; }\n").unwrap();
        let e = b
            .compile(&[Unit { src: d.join("bad.c"), obj: d.join("obj/bad.o"), extra: vec![] }], 2)
            .unwrap_err()
            .to_string();
        assert!(e.contains("the build failed") && e.contains("nope"), "{e}");
        assert!(b.require(&["bad.c"], "test").is_ok());
        assert!(b.require(&["missing.c"], "test").unwrap_err().to_string().contains("missing.c"));
    }
}
