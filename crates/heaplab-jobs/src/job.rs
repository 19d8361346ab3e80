//! One job: a kind (which study runs it, and how), its parameters, the files
//! it reads with their content hashes, and the command line that runs it
//! anywhere those files are at the same paths:
//!
//! ```text
//! HEAPLAB job KIND --id ID --out OUT --input PATH=sha256:HEX ... --KEY VALUE ...
//! ```
//!
//! The id is `KIND-` and the first 16 hex digits of the SHA-256 of the kind,
//! the parameters in order and every input's path and hash: the same work
//! has the same id, in any plan, on any machine, and different work a
//! different one.

use crate::hash;
use crate::shell;
use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// A file a job reads, and the SHA-256 of its content when the job was made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Input {
    pub path: PathBuf,
    pub sha256: String,
}

impl Input {
    /// The file at `path` (made absolute), hashed now.
    pub fn of(path: &Path) -> Result<Input> {
        let abs = std::path::absolute(path)?;
        Ok(Input { sha256: hash::file(&abs)?, path: abs })
    }

    /// `PATH=sha256:HEX`, as `--input` takes it.
    pub fn arg(&self) -> String {
        format!("{}={}", self.path.display(), self.sha256)
    }

    /// Parses `PATH=sha256:HEX` (the path may hold `=`: the hash is after the last one).
    pub fn parse(s: &str) -> Result<Input> {
        match s.rsplit_once('=') {
            Some((p, h)) if h.starts_with("sha256:") && !p.is_empty() => {
                Ok(Input { path: PathBuf::from(p), sha256: h.to_string() })
            }
            _ => bail!("--input {s:?}: expected PATH=sha256:HEX"),
        }
    }

    /// Fails, naming the file, unless it still has the hash the job was made with.
    pub fn verify(&self) -> Result<()> {
        let now = hash::file(&self.path).map_err(|e| {
            anyhow::anyhow!("input {}: {e:#} (the job needs it at this path)", self.path.display())
        })?;
        if now != self.sha256 {
            bail!(
                "input {} changed since the job was planned: it is {now}, the plan has {}",
                self.path.display(),
                self.sha256
            );
        }
        Ok(())
    }
}

/// One unit of a study: a pure function of its inputs and parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// `KIND-` + 16 hex digits (see the module docs).
    pub id: String,
    /// `STUDY.MEASUREMENT`, e.g. `compare.count`: what `heaplab job` runs.
    pub kind: String,
    /// What progress groups it under (compare: the allocator).
    pub group: String,
    /// A few words for people: `count perl-wc firstfit`.
    pub label: String,
    /// The files it reads.
    pub inputs: Vec<Input>,
    /// Its parameters, in order: `--KEY VALUE` on its command line.
    pub params: Vec<(String, String)>,
    /// Its expected cost in seconds, for the order of work and the ETA.
    pub weight: f64,
    /// It measures wall time: run it alone on its machine, one at a time.
    pub alone: bool,
}

impl Job {
    pub fn new(
        kind: &str,
        group: &str,
        label: &str,
        inputs: Vec<Input>,
        params: Vec<(String, String)>,
        weight: f64,
    ) -> Job {
        let mut text = format!("{kind}\n");
        for (k, v) in &params {
            text.push_str(&format!("--{k}\0{v}\n"));
        }
        for i in &inputs {
            text.push_str(&format!("input\0{}\0{}\n", i.path.display(), i.sha256));
        }
        Job {
            id: format!("{}-{}", kind.replace('.', "-"), &hash::bytes(text.as_bytes())[..16]),
            kind: kind.to_string(),
            group: group.to_string(),
            label: label.to_string(),
            inputs,
            params,
            weight,
            alone: false,
        }
    }

    /// The same job, marked to run alone (it times something).
    pub fn alone(mut self) -> Job {
        self.alone = true;
        self
    }

    /// A parameter's value.
    pub fn param(&self, key: &str) -> Option<&str> {
        self.params.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// Its command line, run by `heaplab` at `exe`, writing to `out`.
    pub fn argv(&self, exe: &Path, out: &Path) -> Vec<String> {
        let mut v = vec![
            exe.display().to_string(),
            "job".into(),
            self.kind.clone(),
            "--id".into(),
            self.id.clone(),
            "--out".into(),
            out.display().to_string(),
        ];
        for i in &self.inputs {
            v.push("--input".into());
            v.push(i.arg());
        }
        for (k, val) in &self.params {
            v.push(format!("--{k}"));
            v.push(val.clone());
        }
        v
    }

    /// The command line as one line of shell, every word quoted.
    pub fn command_line(&self, exe: &Path, out: &Path) -> String {
        shell::join(&self.argv(exe, out))
    }
}

/// A job's command line as `heaplab job` receives it, after `job KIND`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Invocation {
    pub id: Option<String>,
    pub out: Option<PathBuf>,
    pub inputs: Vec<Input>,
    pub params: Vec<(String, String)>,
}

impl Invocation {
    /// Parses `--id ID --out FILE --input P=H ... --KEY VALUE ...`.
    pub fn parse(args: &[String]) -> Result<Invocation> {
        let mut inv = Invocation::default();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let Some(key) = a.strip_prefix("--") else {
                bail!("unexpected argument {a:?}: a job takes --KEY VALUE pairs");
            };
            let Some(v) = it.next() else { bail!("{a} needs a value") };
            match key {
                "id" => inv.id = Some(v.clone()),
                "out" => inv.out = Some(PathBuf::from(v)),
                "input" => inv.inputs.push(Input::parse(v)?),
                _ => inv.params.push((key.to_string(), v.clone())),
            }
        }
        Ok(inv)
    }

    /// The job this invocation describes (its id recomputed), checked
    /// against the id it was given: a command line edited by hand, or made
    /// by another version of heaplab, is refused.
    pub fn job(&self, kind: &str) -> Result<Job> {
        let job = Job::new(kind, "", "", self.inputs.clone(), self.params.clone(), 0.0);
        if let Some(id) = &self.id {
            if *id != job.id {
                bail!(
                    "job {id}: its arguments hash to {}, not to its id (was the line edited, or made by another heaplab?)",
                    job.id
                );
            }
        }
        Ok(job)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_hash_everything_and_command_lines_round_trip() {
        let i = Input { path: "/t/a b.hltrace".into(), sha256: "sha256:00".into() };
        let a = Job::new(
            "compare.count",
            "g",
            "l",
            vec![i.clone()],
            vec![("x".into(), "1".into())],
            1.0,
        );
        let b = Job::new(
            "compare.count",
            "g",
            "l",
            vec![i.clone()],
            vec![("x".into(), "2".into())],
            1.0,
        );
        let c = Job::new(
            "compare.time",
            "g",
            "l",
            vec![i.clone()],
            vec![("x".into(), "1".into())],
            1.0,
        );
        assert!(a.id.starts_with("compare-count-"));
        assert_ne!(a.id, b.id);
        assert_ne!(a.id, c.id);
        let argv = a.argv(Path::new("/bin/heaplab"), Path::new("/r/x.json"));
        assert_eq!(&argv[1..3], &["job".to_string(), "compare.count".to_string()]);
        let inv = Invocation::parse(&argv[3..]).unwrap();
        assert_eq!(inv.job("compare.count").unwrap().id, a.id);
        assert_eq!(inv.inputs, vec![i]);
        assert_eq!(inv.out.as_deref(), Some(Path::new("/r/x.json")));
        assert!(inv.job("compare.time").is_err(), "a different kind does not match the id");
        assert!(Input::parse("nohash").is_err());
        assert_eq!(Input::parse("/a=b=sha256:ff").unwrap().path, PathBuf::from("/a=b"));
    }
}
