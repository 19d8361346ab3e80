//! Compiling the generated C with the zoo's shim, platform layer and general
//! allocator into `DIR/libNAME.so` (LD_PRELOAD-able) and `DIR/libNAME.a`.
//!
//! The objects (under `DIR/obj/`):
//!
//! | object | from | how |
//! |---|---|---|
//! | `NAME.o` | `DIR/NAME.c` | the tables, the locked paths, the runtime |
//! | `shim.o` | `native/alloc/shim.c` | `-DHL_ALLOC_SYM=hl_alloc_NAME -DHL_FRONT_H="NAME.h"`: the malloc API with the header's lock-free front end |
//! | `gnugpp.o` | `native/alloc/gnugpp.c` | `-Dhl_sbrk=NAME_gp_sbrk`, so the synthesized allocator sees gnugpp's heap growth and can reclaim first |
//! | `platform.o`, `pad.o` | `native/alloc/` | as in every zoo allocator |
//!
//! The archive holds one relocatable object (`ld -r`) whose hidden symbols are
//! made local, so that only the malloc API, `heaplab_alloc_*` and the
//! header's `NAME_tls`/`NAME_thread_start` are visible to a program.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

/// What the build made, and how.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Built {
    pub so: PathBuf,
    pub archive: PathBuf,
    pub commands: Vec<String>,
    pub seconds: f64,
}

/// The flags of `native/alloc/rules.mk` (ALLOC_CFLAGS) for the shared
/// objects of the zoo, so that the synthesized allocator is compiled as they
/// are.
pub fn cflags(native: &Path) -> Vec<String> {
    let mut f: Vec<String> = "-std=gnu11 -O2 -g -Wall -Wextra -Wno-unused-parameter -fPIC \
         -fno-strict-aliasing -fvisibility=hidden -Werror -Wshadow -Wstrict-prototypes \
         -fno-builtin-malloc -fno-builtin-calloc -fno-builtin-realloc -fno-builtin-free \
         -ftls-model=initial-exec"
        .split_whitespace()
        .map(String::from)
        .collect();
    f.push(format!("-I{}", native.join("common").display()));
    f.push(format!("-I{}", native.join("alloc").display()));
    f
}

fn show(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().to_string();
    for a in cmd.get_args() {
        let a = a.to_string_lossy();
        if a.contains([' ', '"', '\'']) {
            s.push_str(&format!(" '{a}'"));
        } else {
            s.push(' ');
            s.push_str(&a);
        }
    }
    s
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
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// Compiles and links `DIR/NAME.c` (already written) with the zoo's files
/// from `native` (the checkout's `native/` directory).
pub fn build(name: &str, dir: &Path, native: &Path) -> Result<Built> {
    let start = Instant::now();
    let cc = std::env::var("CC").ok().filter(|c| !c.trim().is_empty()).unwrap_or("gcc".into());
    let alloc = native.join("alloc");
    for f in ["shim.c", "platform.c", "pad.c", "gnugpp.c", "hl_alloc.h", "hl_internal.h"] {
        if !alloc.join(f).exists() {
            bail!(
                "{} is missing: heaplab synth builds with the zoo's sources (set HEAPLAB_HOME \
                 to a heaplab checkout)",
                alloc.join(f).display()
            );
        }
    }
    let obj = dir.join("obj");
    std::fs::create_dir_all(&obj).with_context(|| format!("creating {}", obj.display()))?;
    let flags = cflags(native);
    let units: Vec<(PathBuf, &str, Vec<String>)> = vec![
        (dir.join(format!("{name}.c")), "synth", vec![]),
        (
            alloc.join("shim.c"),
            "shim",
            vec![format!("-DHL_ALLOC_SYM=hl_alloc_{name}"), format!("-DHL_FRONT_H=\"{name}.h\"")],
        ),
        (alloc.join("gnugpp.c"), "gnugpp", vec![format!("-Dhl_sbrk={name}_gp_sbrk")]),
        (alloc.join("platform.c"), "platform", vec![]),
        (alloc.join("pad.c"), "pad", vec![]),
    ];
    let mut commands = Vec::new();
    let mut objects = Vec::new();
    let mut running = Vec::new();
    for (src, stem, extra) in &units {
        let o = obj.join(format!("{stem}.o"));
        let mut c = Command::new(&cc);
        c.args(&flags)
            .arg(format!("-I{}", dir.display()))
            .args(extra)
            .arg("-c")
            .arg(src)
            .arg("-o")
            .arg(&o);
        let shown = show(&c);
        running.push((spawn(&mut c)?, shown.clone()));
        commands.push(shown);
        objects.push(o);
        // Two at a time: the machine is shared.
        if running.len() == 2 {
            let (ch, sh) = running.remove(0);
            finish(ch, &sh)?;
        }
    }
    for (ch, sh) in running {
        finish(ch, &sh)?;
    }
    let so = dir.join(format!("lib{name}.so"));
    let mut link = Command::new(&cc);
    link.args(["-shared", "-Wl,-z,now", "-Wl,--no-undefined", "-o"]).arg(&so).args(&objects);
    let shown = show(&link);
    finish(spawn(&mut link)?, &shown)?;
    commands.push(shown);

    // The archive: one relocatable object, hidden symbols made local.
    let whole = obj.join(format!("lib{name}.o"));
    let mut ld = Command::new("ld");
    ld.arg("-r").arg("-o").arg(&whole).args(&objects);
    let shown = show(&ld);
    finish(spawn(&mut ld)?, &shown)?;
    commands.push(shown);
    let mut oc = Command::new("objcopy");
    oc.arg("--localize-hidden").arg(&whole);
    let shown = show(&oc);
    finish(spawn(&mut oc)?, &shown)?;
    commands.push(shown);
    let archive = dir.join(format!("lib{name}.a"));
    let _ = std::fs::remove_file(&archive);
    let mut ar = Command::new("ar");
    ar.arg("rcs").arg(&archive).arg(&whole);
    let shown = show(&ar);
    finish(spawn(&mut ar)?, &shown)?;
    commands.push(shown);

    // Loads and runs a program: the least a malloc must do.
    let mut t = Command::new("/bin/true");
    t.env("LD_PRELOAD", &so);
    let shown = format!("LD_PRELOAD={} /bin/true", so.display());
    finish(spawn(&mut t)?, &shown).context("the built allocator does not run /bin/true")?;
    Ok(Built { so, archive, commands, seconds: start.elapsed().as_secs_f64() })
}
