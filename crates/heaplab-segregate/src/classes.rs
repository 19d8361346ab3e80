//! The four segments and the four thresholds of paper 001 §3.
//!
//! ```text
//!   lifetime ≤ sl_max_age                                   → SL     (short-lived)
//!   lifetime ≥ hr_min_age  and  density ≥ hr_min_density    → HR     (highly referenced)
//!   density ≤ nhr_max_density                               → not-HR
//!   anything else                                           → other
//! ```
//!
//! The rule that keeps the segments apart: SL and HR must not overlap, so
//! `sl_max_age < hr_min_age` (§3: "As long as the maximum lifetime of an SL
//! object is less than the minimum age of an HR object, these segments are
//! non-overlapping"); and HR and not-HR must not either, so
//! `nhr_max_density < hr_min_density`. With both, every object is in exactly
//! one class whatever order the tests run in; the order above only decides
//! between SL and not-HR, which the paper leaves open (a short-lived object
//! with few references goes to SL: lifetime is the stronger signal for
//! placement, since its memory is reused soon).

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use std::fmt;

/// A segment, and the class of object that belongs in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// Neither of the three below: where everything goes without a prediction.
    Other = 0,
    /// Short-lived.
    Sl = 1,
    /// Highly referenced.
    Hr = 2,
    /// Not highly referenced (the paper's HR with a bar over it).
    NotHr = 3,
}

impl Class {
    /// In segment order (the segment index is the discriminant).
    pub const ALL: [Class; 4] = [Class::Other, Class::Sl, Class::Hr, Class::NotHr];

    pub fn index(self) -> usize {
        self as usize
    }
    pub fn from_index(i: usize) -> Option<Class> {
        Class::ALL.get(i).copied()
    }
    /// The name used in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Class::Other => "other",
            Class::Sl => "SL",
            Class::Hr => "HR",
            Class::NotHr => "nonHR",
        }
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The four thresholds (§3). Ages are instructions, densities references per byte.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Thresholds {
    /// The maximum age of an SL object.
    pub sl_max_age: u64,
    /// The minimum age of an HR object.
    pub hr_min_age: u64,
    /// The minimum reference density of an HR object.
    pub hr_min_density: f64,
    /// The maximum reference density of a not-HR object.
    pub nhr_max_density: f64,
}

impl Thresholds {
    /// Checked thresholds: SL and HR, and HR and not-HR, must not overlap.
    pub fn new(
        sl_max_age: u64,
        hr_min_age: u64,
        hr_min_density: f64,
        nhr_max_density: f64,
    ) -> Result<Thresholds> {
        let t = Thresholds { sl_max_age, hr_min_age, hr_min_density, nhr_max_density };
        t.validate()?;
        Ok(t)
    }

    /// The non-overlap rule and sane numbers.
    pub fn validate(&self) -> Result<()> {
        if self.sl_max_age >= self.hr_min_age {
            bail!(
                "the maximum SL age ({}) must be below the minimum HR age ({}): SL and HR would overlap",
                self.sl_max_age,
                self.hr_min_age
            );
        }
        if !(self.hr_min_density.is_finite() && self.nhr_max_density.is_finite())
            || self.nhr_max_density < 0.0
        {
            bail!("densities must be finite and not negative");
        }
        if self.nhr_max_density >= self.hr_min_density {
            bail!(
                "the maximum not-HR density ({}) must be below the minimum HR density ({}): HR and not-HR would overlap",
                self.nhr_max_density,
                self.hr_min_density
            );
        }
        Ok(())
    }

    /// The class of an object with this lifetime and density.
    #[inline]
    pub fn classify(&self, lifetime: u64, density: f64) -> Class {
        if lifetime <= self.sl_max_age {
            Class::Sl
        } else if lifetime >= self.hr_min_age && density >= self.hr_min_density {
            Class::Hr
        } else if density <= self.nhr_max_density {
            Class::NotHr
        } else {
            Class::Other
        }
    }

    /// Parses `SL_MAX_AGE,HR_MIN_AGE,HR_MIN_DENSITY,NHR_MAX_DENSITY`.
    pub fn parse(s: &str) -> Result<Thresholds> {
        let f: Vec<&str> = s.split(',').map(str::trim).collect();
        if f.len() != 4 {
            bail!("thresholds {s:?}: expected SL_MAX_AGE,HR_MIN_AGE,HR_MIN_DENSITY,NHR_MAX_DENSITY (four numbers, e.g. 10000,1000000,2.0,0.05)");
        }
        let age = |x: &str, what: &str| -> Result<u64> {
            x.parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .map(|v| v as u64)
                .ok_or_else(|| anyhow::anyhow!("{what} {x:?} is not a number of instructions"))
        };
        let dens = |x: &str, what: &str| -> Result<f64> {
            x.parse::<f64>().ok().filter(|v| v.is_finite() && *v >= 0.0).ok_or_else(|| {
                anyhow::anyhow!("{what} {x:?} is not a density (references per byte)")
            })
        };
        Thresholds::new(
            age(f[0], "the maximum SL age")?,
            age(f[1], "the minimum HR age")?,
            dens(f[2], "the minimum HR density")?,
            dens(f[3], "the maximum not-HR density")?,
        )
    }
}

impl fmt::Display for Thresholds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SL age ≤ {}, HR age ≥ {}, HR density ≥ {}, not-HR density ≤ {}",
            self.sl_max_age, self.hr_min_age, self.hr_min_density, self.nhr_max_density
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t() -> Thresholds {
        Thresholds::new(1000, 100_000, 2.0, 0.1).unwrap()
    }

    #[test]
    fn classifies_at_and_around_each_threshold() {
        let t = t();
        assert_eq!(t.classify(0, 100.0), Class::Sl);
        assert_eq!(t.classify(1000, 0.0), Class::Sl); // the maximum SL age is SL
        assert_eq!(t.classify(1001, 0.0), Class::NotHr);
        assert_eq!(t.classify(1001, 0.1), Class::NotHr); // the maximum not-HR density is not-HR
        assert_eq!(t.classify(1001, 0.11), Class::Other);
        assert_eq!(t.classify(99_999, 50.0), Class::Other); // dense but too young for HR
        assert_eq!(t.classify(100_000, 2.0), Class::Hr); // both minima are HR
        assert_eq!(t.classify(100_000, 1.99), Class::Other);
        assert_eq!(t.classify(u64::MAX, 0.05), Class::NotHr);
    }

    #[test]
    fn the_non_overlap_rule() {
        assert!(Thresholds::new(1000, 1000, 2.0, 0.1).is_err()); // SL max = HR min: overlap
        assert!(Thresholds::new(2000, 1000, 2.0, 0.1).is_err());
        assert!(Thresholds::new(999, 1000, 2.0, 0.1).is_ok());
        assert!(Thresholds::new(10, 1000, 0.5, 0.5).is_err()); // HR and not-HR overlap
        assert!(Thresholds::new(10, 1000, 0.5, f64::NAN).is_err());
        let e = Thresholds::new(1000, 10, 2.0, 0.1).unwrap_err().to_string();
        assert!(e.contains("overlap"), "{e}");
    }

    #[test]
    fn every_object_is_in_exactly_one_class() {
        // With the rule in force, the class does not depend on the order of the tests.
        let t = t();
        for life in [0, 999, 1000, 1001, 50_000, 100_000, 10_000_000] {
            for d in [0.0, 0.05, 0.1, 0.5, 1.99, 2.0, 40.0] {
                let sl = life <= t.sl_max_age;
                let hr = life >= t.hr_min_age && d >= t.hr_min_density;
                assert!(!(sl && hr));
                assert!(!(hr && d <= t.nhr_max_density));
                let c = t.classify(life, d);
                assert_eq!(c == Class::Hr, hr);
                assert_eq!(c == Class::Sl, sl);
            }
        }
    }

    #[test]
    fn parses_and_explains() {
        let t = Thresholds::parse("1e3, 1e5, 2, 0.1").unwrap();
        assert_eq!(t, self::t());
        assert!(Thresholds::parse("1,2,3").unwrap_err().to_string().contains("four numbers"));
        assert!(Thresholds::parse("x,2,3,1").unwrap_err().to_string().contains("SL age"));
    }
}
