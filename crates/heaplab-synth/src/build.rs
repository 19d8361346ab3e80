//! Compiling the generated C with the zoo's shim, platform layer and general
//! allocator into `DIR/libNAME.so` (LD_PRELOAD-able) and `DIR/libNAME.a`.
//!
//! The objects (under `DIR/obj/`):
//!
//! | object | from | how |
//! |---|---|---|
//! | `NAME.o` | `DIR/NAME.c` | the tables, the entry points with the fast path in them, the runtime |
//! | `fastcore.o` | `native/alloc/fastcore.c` | the fast core's slow paths (slots, slabs, reclaim, threads) |
//! | `shim.o` | `native/alloc/shim.c` | `-DHL_ALLOC_SYM=hl_alloc_NAME -DHL_FRONT_H="NAME.h" -DHL_API_malloc=NAME_locked_malloc ...`: the rest of the malloc API, and the locked versions of the entry points NAME.c defines |
//! | `gnugpp.o` | `native/alloc/gnugpp.c` | `-Dhl_sbrk=NAME_gp_sbrk`, so the synthesized allocator sees gnugpp's heap growth and can reclaim first; `-DGNUGPP_LAZY_START=1`, so its heap starts at its first growth |
//! | `platform.o`, `pad.o` | `native/alloc/` | as in every zoo allocator |
//!
//! The archive holds one relocatable object (`ld -r`) whose hidden symbols are
//! made local, so that only the malloc API, `heaplab_alloc_*` and the
//! header's `NAME_tls`, `NAME_malloc_slow` and `NAME_free_slow` are visible
//! to a program. `fastcore.h` and `hl_alloc.h` are copied beside `NAME.h`,
//! so that a program needs only `-IDIR`.

use anyhow::{Context, Result};
use heaplab_plumb::cbuild::{CBuild, Unit};
use heaplab_plumb::Layout;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// What the build made, and how.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Built {
    pub so: PathBuf,
    pub archive: PathBuf,
    pub commands: Vec<String>,
    pub seconds: f64,
}

/// Compiles and links `DIR/NAME.c` (already written) with the zoo's files
/// and flags (`layout.native`, `layout.zoo_cflags`: heaplab-plumb's C builder).
/// `count_calls`: the statistics build (`-DSF_COUNT=1` for fastcore.c; the
/// header NAME.h says the same to everything that includes it).
pub fn build(name: &str, dir: &Path, layout: &Layout, count_calls: bool) -> Result<Built> {
    let start = Instant::now();
    let mut cb = CBuild::zoo(layout)?;
    cb.require(
        &[
            "alloc/shim.c",
            "alloc/platform.c",
            "alloc/pad.c",
            "alloc/gnugpp.c",
            "alloc/fastcore.c",
            "alloc/fastcore.h",
            "alloc/hl_alloc.h",
            "alloc/hl_internal.h",
        ],
        "heaplab synth",
    )?;
    cb.include(dir);
    let alloc = layout.native.join("alloc");
    let obj = dir.join("obj");
    let unit = |src: PathBuf, stem: &str, extra: Vec<String>| Unit {
        src,
        obj: obj.join(format!("{stem}.o")),
        extra,
    };
    for h in ["fastcore.h", "hl_alloc.h"] {
        let text = std::fs::read_to_string(alloc.join(h))
            .with_context(|| format!("reading {}", alloc.join(h).display()))?;
        heaplab_plumb::output::write(&dir.join(h), &text)?;
    }
    let mut shim =
        vec![format!("-DHL_ALLOC_SYM=hl_alloc_{name}"), format!("-DHL_FRONT_H=\"{name}.h\"")];
    for api in ["malloc", "free", "calloc", "realloc", "malloc_usable_size"] {
        shim.push(format!("-DHL_API_{api}={name}_locked_{api}"));
    }
    let units = vec![
        unit(dir.join(format!("{name}.c")), "synth", vec![]),
        unit(
            alloc.join("fastcore.c"),
            "fastcore",
            vec![format!("-DSF_COUNT={}", u8::from(count_calls))],
        ),
        unit(alloc.join("shim.c"), "shim", shim),
        unit(
            alloc.join("gnugpp.c"),
            "gnugpp",
            vec![format!("-Dhl_sbrk={name}_gp_sbrk"), "-DGNUGPP_LAZY_START=1".into()],
        ),
        unit(alloc.join("platform.c"), "platform", vec![]),
        unit(alloc.join("pad.c"), "pad", vec![]),
    ];
    // Two at a time: the machine is shared.
    cb.compile(&units, 2)?;
    let objects: Vec<PathBuf> = units.iter().map(|u| u.obj.clone()).collect();
    let so = dir.join(format!("lib{name}.so"));
    cb.link_shared(&so, &objects, &[])?;

    // The archive: one relocatable object, hidden symbols made local.
    let whole = obj.join(format!("lib{name}.o"));
    let mut ld = Command::new("ld");
    ld.arg("-r").arg("-o").arg(&whole).args(&objects);
    cb.run(ld)?;
    let mut oc = Command::new("objcopy");
    oc.arg("--localize-hidden").arg(&whole);
    cb.run(oc)?;
    let archive = dir.join(format!("lib{name}.a"));
    let _ = std::fs::remove_file(&archive);
    let mut ar = Command::new("ar");
    ar.arg("rcs").arg(&archive).arg(&whole);
    cb.run(ar)?;

    // Loads and runs a program: the least a malloc must do.
    let mut t = Command::new("/bin/true");
    t.env("LD_PRELOAD", &so);
    heaplab_plumb::process::checked(&mut t)
        .context("the built allocator does not run /bin/true")?;
    let mut commands = cb.commands;
    commands.push(format!("LD_PRELOAD={} /bin/true", so.display()));
    Ok(Built { so, archive, commands, seconds: start.elapsed().as_secs_f64() })
}
