//! Machine configurations, kept apart from the simulators: a cache
//! [`CacheConfig`] (size, line, associativity, with its shifts and masks
//! precomputed), page sizes, and the SPEC strings that `heaplab sim` takes.
//!
//! ```text
//!   address:  | tag ............ | set index (log2 sets) | offset (log2 line) |
//!   line    = addr >> line_shift            (the line's number, used as its tag)
//!   set     = line & set_mask               (bit selection; sets is a power of two)
//! ```

use std::fmt;

/// The largest associativity a configuration may have. A set is searched
/// linearly, so very wide sets are slow; 256 ways covers every real L1/L2.
pub const MAX_ASSOC: u32 = 256;
/// The smallest line. (No real cache has smaller lines, and with lines of
/// 2 bytes or more no line number can equal the empty-way tag.)
pub const MIN_LINE: u32 = 4;
/// The largest line (and the largest page is [`MAX_PAGE`]).
pub const MAX_LINE: u32 = 4096;
/// The largest page size.
pub const MAX_PAGE: u64 = 1 << 30;

/// What is wrong with a configuration or a SPEC, said so that the user knows
/// what would have been right.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

fn err<T>(msg: String) -> Result<T, ConfigError> {
    Err(ConfigError(msg))
}

/// One cache: `size` bytes in lines of `line` bytes, `assoc` lines per set,
/// LRU within a set. Direct-mapped is `assoc == 1`.
///
/// The number of sets must be a power of two (sets are picked by address bits,
/// as in real caches and in cachegrind).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CacheConfig {
    size: u64,
    line: u32,
    assoc: u32,
    line_shift: u32,
    sets: u64,
    set_mask: u64,
}

impl CacheConfig {
    /// A configuration, or why it is not one.
    pub fn new(size: u64, line: u32, assoc: u32) -> Result<CacheConfig, ConfigError> {
        let name = format!("{}:{}:{}", fmt_bytes(size), line, assoc);
        if !line.is_power_of_two() || !(MIN_LINE..=MAX_LINE).contains(&line) {
            return err(format!(
                "{name}: the line size must be a power of two from {MIN_LINE} to {MAX_LINE} bytes (32 and 64 are usual), not {line}"
            ));
        }
        if assoc == 0 || assoc > MAX_ASSOC {
            return err(format!(
                "{name}: the associativity must be from 1 (direct-mapped) to {MAX_ASSOC} ways, not {assoc}"
            ));
        }
        let way_bytes = line as u64 * assoc as u64;
        if size == 0 || !size.is_multiple_of(way_bytes) || !(size / way_bytes).is_power_of_two() {
            // Suggest the nearest sizes that give a power-of-two number of sets.
            let sets = (size / way_bytes).max(1);
            let lo = 1u64 << (63 - sets.leading_zeros());
            let lo_size = lo * way_bytes;
            let hi_size = lo_size * 2;
            let alt = if lo_size == size || lo_size == 0 {
                fmt_bytes(hi_size)
            } else {
                format!("{} or {}", fmt_bytes(lo_size), fmt_bytes(hi_size))
            };
            return err(format!(
                "{name}: {size} bytes / ({line}-byte lines x {assoc} ways) is not a power-of-two number of sets; \
                 with {line}-byte lines and {assoc} ways try a size of {alt}"
            ));
        }
        let sets = size / way_bytes;
        Ok(CacheConfig {
            size,
            line,
            assoc,
            line_shift: line.trailing_zeros(),
            sets,
            set_mask: sets - 1,
        })
    }

    /// Capacity in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }
    /// Line (block) size in bytes.
    pub fn line(&self) -> u32 {
        self.line
    }
    /// Lines per set (1 = direct-mapped).
    pub fn assoc(&self) -> u32 {
        self.assoc
    }
    /// Number of sets.
    pub fn sets(&self) -> u64 {
        self.sets
    }
    /// `log2(line)`: an address shifted right by this is its line number.
    #[inline(always)]
    pub fn line_shift(&self) -> u32 {
        self.line_shift
    }
    /// `sets - 1`: a line number masked by this is its set.
    #[inline(always)]
    pub fn set_mask(&self) -> u64 {
        self.set_mask
    }
}

impl fmt::Display for CacheConfig {
    /// The SPEC form, `32K:32:1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", fmt_bytes(self.size), self.line, self.assoc)
    }
}

/// `32768` as `32K`, `1048576` as `1M`, `1000` as `1000`.
pub fn fmt_bytes(n: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")];
    for (u, s) in UNITS {
        if n >= u && n.is_multiple_of(u) {
            return format!("{}{}", n / u, s);
        }
    }
    n.to_string()
}

/// Parses a byte count: `512`, `32K`, `32k`, `32KB`, `32KiB`, `1M`, `1G`.
/// Units are binary (K = 1024).
pub fn parse_bytes(s: &str) -> Result<u64, ConfigError> {
    let t = s.trim();
    let digits = t.bytes().take_while(|b| b.is_ascii_digit()).count();
    let (num, unit) = t.split_at(digits);
    let bad = || {
        ConfigError(format!("`{s}` is not a byte count; write a number with an optional K, M or G, such as 512, 32K or 1M"))
    };
    if num.is_empty() {
        return Err(bad());
    }
    let n: u64 = num.parse().map_err(|_| bad())?;
    let mult = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return Err(bad()),
    };
    n.checked_mul(mult).ok_or_else(bad)
}

/// The configurations the issue's sweep asks for: sizes 512 B to 1 MB
/// (powers of two), lines of 32 and 64 bytes, 1, 2, 4 and 8 ways: 96 caches.
pub fn sweep_configs() -> Vec<CacheConfig> {
    let mut v = Vec::new();
    for line in [32, 64] {
        for assoc in [1, 2, 4, 8] {
            for shift in 9..=20 {
                // 512 B with 64-byte lines and 8 ways is one set: still valid.
                if let Ok(c) = CacheConfig::new(1 << shift, line, assoc) {
                    v.push(c);
                }
            }
        }
    }
    v
}

/// Paper 000's caches: direct-mapped, 32-byte lines, 16 KB to 256 KB.
pub fn paper000_configs() -> Vec<CacheConfig> {
    (14..=18).map(|s| CacheConfig::new(1 << s, 32, 1).expect("valid")).collect()
}

/// What `--caches` accepts, for help texts and error messages.
pub const CACHE_SPEC_HELP: &str =
    "a comma-separated list of SIZE:LINE:ASSOC, such as 32K:32:1,256K:64:8 \
(SIZE in bytes with an optional K/M/G, LINE a power of two, ASSOC 1 for direct-mapped), \
or `sweep` (512 B..1 MB x lines 32, 64 x 1, 2, 4, 8 ways) or `paper000` (16K..256K:32:1); \
names and triples may be mixed";

/// Parses a cache SPEC (see [`CACHE_SPEC_HELP`]). Duplicates are kept once,
/// in first-seen order.
pub fn parse_cache_spec(spec: &str) -> Result<Vec<CacheConfig>, ConfigError> {
    let mut out: Vec<CacheConfig> = Vec::new();
    let mut push = |c: CacheConfig| {
        if !out.contains(&c) {
            out.push(c);
        }
    };
    for item in spec.split(',').map(str::trim) {
        match item {
            "" => {
                return err(format!(
                    "cache SPEC `{spec}` has an empty item; expected {CACHE_SPEC_HELP}"
                ))
            }
            "sweep" => sweep_configs().into_iter().for_each(&mut push),
            "paper000" => paper000_configs().into_iter().for_each(&mut push),
            _ => {
                let parts: Vec<&str> = item.split(':').collect();
                if parts.len() != 3 {
                    return err(format!(
                        "cache `{item}` in SPEC `{spec}` is not SIZE:LINE:ASSOC; expected {CACHE_SPEC_HELP}"
                    ));
                }
                let size = parse_bytes(parts[0])
                    .map_err(|e| ConfigError(format!("cache `{item}`: size {e}")))?;
                let line = parse_bytes(parts[1])
                    .map_err(|e| ConfigError(format!("cache `{item}`: line {e}")))?;
                let assoc: u32 = parts[2].trim().parse().map_err(|_| {
                    ConfigError(format!(
                        "cache `{item}`: associativity `{}` is not a number; write 1 for direct-mapped, or 2, 4, 8 ... ways",
                        parts[2]
                    ))
                })?;
                let line = u32::try_from(line).unwrap_or(u32::MAX);
                push(CacheConfig::new(size, line, assoc)?);
            }
        }
    }
    Ok(out)
}

/// What `--pages` accepts.
pub const PAGE_SPEC_HELP: &str =
    "a comma-separated list of page sizes, powers of two such as 4K,8K (or `none`)";

/// Parses a page SPEC such as `4K,8K` into page sizes in bytes, kept once each
/// in first-seen order. `none` (or an empty string) is no page simulation.
pub fn parse_page_spec(spec: &str) -> Result<Vec<u64>, ConfigError> {
    let mut out = Vec::new();
    let t = spec.trim();
    if t.is_empty() || t == "none" {
        return Ok(out);
    }
    for item in t.split(',').map(str::trim) {
        let n = parse_bytes(item).map_err(|e| {
            ConfigError(format!("page size in SPEC `{spec}`: {e}; expected {PAGE_SPEC_HELP}"))
        })?;
        check_page_size(n)?;
        if !out.contains(&n) {
            out.push(n);
        }
    }
    Ok(out)
}

/// Checks that `n` is a usable page size: a power of two from 2 bytes (so that
/// no page number is `u64::MAX`) up to [`MAX_PAGE`].
pub fn check_page_size(n: u64) -> Result<(), ConfigError> {
    if n < 2 || !n.is_power_of_two() || n > MAX_PAGE {
        return err(format!(
            "page size {n} is not a power of two from 2 bytes to 1G; 4K and 8K are the usual ones"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shifts_and_masks() {
        let c = CacheConfig::new(32 << 10, 32, 1).unwrap();
        assert_eq!((c.sets(), c.line_shift(), c.set_mask()), (1024, 5, 1023));
        let c = CacheConfig::new(256 << 10, 64, 8).unwrap();
        assert_eq!((c.sets(), c.line_shift(), c.set_mask()), (512, 6, 511));
        assert_eq!(c.to_string(), "256K:64:8");
    }

    #[test]
    fn bad_configs_say_what_would_be_right() {
        let e = CacheConfig::new(32 << 10, 32, 3).unwrap_err().0;
        assert!(e.contains("24K or 48K"), "{e}");
        let e = CacheConfig::new(32 << 10, 48, 1).unwrap_err().0;
        assert!(e.contains("power of two"), "{e}");
        let e = CacheConfig::new(32 << 10, 32, 0).unwrap_err().0;
        assert!(e.contains("from 1 (direct-mapped)"), "{e}");
        assert!(CacheConfig::new(100, 32, 1).is_err());
        assert!(CacheConfig::new(16, 32, 1).is_err());
    }

    #[test]
    fn specs() {
        let v = parse_cache_spec("32K:32:1, 256K:64:8,32k:32B:1").unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(v[1], CacheConfig::new(256 << 10, 64, 8).unwrap());
        assert_eq!(parse_cache_spec("sweep").unwrap().len(), 96);
        assert_eq!(parse_cache_spec("paper000,16K:32:1").unwrap().len(), 5);
        for bad in ["32K:32", "32K:32:x", "32Q:32:1", "", "32K:32:1,", "32K:33:1"] {
            let e = parse_cache_spec(bad).unwrap_err().0;
            assert!(!e.is_empty());
        }
        assert_eq!(parse_page_spec("4K,8K,4096").unwrap(), vec![4096, 8192]);
        assert_eq!(parse_page_spec("none").unwrap(), Vec::<u64>::new());
        assert!(parse_page_spec("3K").is_err());
        assert!(parse_page_spec("4K,,8K").is_err());
    }

    #[test]
    fn bytes() {
        assert_eq!(parse_bytes("1M").unwrap(), 1 << 20);
        assert_eq!(parse_bytes("64KiB").unwrap(), 64 << 10);
        assert!(parse_bytes("K").is_err());
        assert!(parse_bytes("99999999999999999999").is_err());
        assert_eq!(fmt_bytes(1 << 20), "1M");
        assert_eq!(fmt_bytes(1000), "1000");
    }
}
