//! Progress of a study's jobs on stderr: on a terminal, a bar for the whole
//! run with the time left and one line per group (an allocator) with its
//! own; in a log (stderr not a terminal), one plain line per job finished.

use heaplab_jobs::eta::{human, Eta};
use heaplab_jobs::{Job, Observer, Outcome};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::collections::{BTreeMap, HashMap};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

struct Bars {
    multi: MultiProgress,
    total: ProgressBar,
    groups: HashMap<String, ProgressBar>,
}

/// The shared state the ticker thread reads.
struct Inner {
    what: String,
    eta: OnceLock<Eta>,
    bars: Mutex<Option<Bars>>,
    /// Per job id: its group and label.
    jobs: OnceLock<HashMap<String, (String, String)>>,
    groups: OnceLock<Vec<String>>,
    running: Mutex<BTreeMap<String, String>>,
    done: AtomicUsize,
    total: AtomicUsize,
    stop: AtomicBool,
}

/// A [`heaplab_jobs::Observer`] that shows progress on stderr.
pub struct Progress {
    inner: Arc<Inner>,
    terminal: bool,
    ticker: Mutex<Option<std::thread::JoinHandle<()>>>,
    workers: usize,
}

impl Progress {
    /// `what` starts every plain line (`heaplab compare`); `workers`: jobs at a time.
    pub fn new(what: &str, workers: usize) -> Progress {
        Progress {
            inner: Arc::new(Inner {
                what: what.to_string(),
                eta: OnceLock::new(),
                bars: Mutex::new(None),
                jobs: OnceLock::new(),
                groups: OnceLock::new(),
                running: Mutex::new(BTreeMap::new()),
                done: AtomicUsize::new(0),
                total: AtomicUsize::new(0),
                stop: AtomicBool::new(false),
            }),
            terminal: std::io::stderr().is_terminal(),
            ticker: Mutex::new(None),
            workers,
        }
    }

    /// Clears the bars (before the results are printed).
    pub fn finish(&self) {
        self.inner.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.ticker.lock().expect("no panics under the lock").take() {
            let _ = t.join();
        }
        if let Some(b) = self.inner.bars.lock().expect("no panics under the lock").take() {
            for g in b.groups.values() {
                g.finish_and_clear();
            }
            b.total.finish_and_clear();
            let _ = b.multi.clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

impl Inner {
    fn eta(&self) -> Option<&Eta> {
        self.eta.get()
    }

    /// The top line's message: the time left and what runs.
    fn refresh(&self) {
        let bars = self.bars.lock().expect("no panics under the lock");
        let Some(b) = bars.as_ref() else { return };
        let Some(eta) = self.eta() else { return };
        let running: Vec<String> =
            self.running.lock().expect("no panics under the lock").values().cloned().collect();
        b.total.set_message(format!(
            "about {} left{}{}",
            human(eta.left_total()),
            if running.is_empty() { "" } else { "; now: " },
            running.join(", ")
        ));
        for (g, bar) in &b.groups {
            let (done, all) = eta.group_counts(g);
            if done < all {
                bar.set_message(format!("~{}", human(eta.left_group(g))));
            } else {
                bar.set_message("done".to_string());
            }
        }
    }
}

impl Observer for Progress {
    fn begin(&self, jobs: &[Job]) {
        let inner = &self.inner;
        let _ = inner.eta.set(Eta::new(jobs, self.workers));
        let _ = inner
            .jobs
            .set(jobs.iter().map(|j| (j.id.clone(), (j.group.clone(), j.label.clone()))).collect());
        let mut groups: Vec<String> = Vec::new();
        for j in jobs {
            if !groups.contains(&j.group) {
                groups.push(j.group.clone());
            }
        }
        let _ = inner.groups.set(groups.clone());
        inner.total.store(jobs.len(), Ordering::SeqCst);
        let left = inner.eta().map(|e| human(e.left_total())).unwrap_or_default();
        if !self.terminal {
            eprintln!(
                "{}: {} jobs ({} groups), about {left} by the first estimate",
                inner.what,
                jobs.len(),
                groups.len()
            );
            return;
        }
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        let total = multi.add(ProgressBar::new(jobs.len() as u64));
        total.set_style(
            ProgressStyle::with_template("{bar:30} {pos}/{len} jobs {elapsed_precise} {wide_msg}")
                .expect("valid template"),
        );
        let width = groups.iter().map(|g| g.chars().count()).max().unwrap_or(8).min(24);
        let mut gbars = HashMap::new();
        for g in &groups {
            let n = jobs.iter().filter(|j| &j.group == g).count();
            let b = multi.add(ProgressBar::new(n as u64));
            b.set_style(
                ProgressStyle::with_template(&format!(
                    "  {{prefix:{width}}} {{bar:20}} {{pos}}/{{len}} {{msg}}"
                ))
                .expect("valid template"),
            );
            b.set_prefix(g.clone());
            gbars.insert(g.clone(), b);
        }
        *inner.bars.lock().expect("no panics under the lock") =
            Some(Bars { multi, total, groups: gbars });
        inner.refresh();
        let me = Arc::clone(inner);
        *self.ticker.lock().expect("no panics under the lock") =
            Some(std::thread::spawn(move || {
                while !me.stop.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(250));
                    me.refresh();
                }
            }));
    }

    fn reweigh(&self, job: &Job) {
        if let Some(e) = self.inner.eta() {
            e.reweigh(&job.id, job.weight);
        }
    }

    fn started(&self, job: &Job) {
        if let Some(e) = self.inner.eta() {
            e.started(&job.id);
        }
        self.inner
            .running
            .lock()
            .expect("no panics under the lock")
            .insert(job.id.clone(), job.label.clone());
    }

    fn finished(&self, job: &Job, o: &Outcome, reused: bool) {
        let inner = &self.inner;
        if let Some(e) = inner.eta() {
            e.finished(&job.id, o.seconds, !reused);
        }
        inner.running.lock().expect("no panics under the lock").remove(&job.id);
        let done = inner.done.fetch_add(1, Ordering::SeqCst) + 1;
        let total = inner.total.load(Ordering::SeqCst);
        if self.terminal {
            if let Some(b) = inner.bars.lock().expect("no panics under the lock").as_ref() {
                b.total.inc(1);
                if let Some(g) = b.groups.get(&job.group) {
                    g.inc(1);
                }
                if !o.ok() {
                    b.multi
                        .println(format!(
                            "{}: {} failed: {}",
                            inner.what,
                            job.label,
                            o.error.as_deref().unwrap_or("")
                        ))
                        .ok();
                }
            }
            inner.refresh();
            return;
        }
        let how = if reused {
            "kept from before".to_string()
        } else if o.ok() {
            format!("{:.1} s", o.seconds)
        } else {
            format!("FAILED after {:.1} s: {}", o.seconds, o.error.as_deref().unwrap_or(""))
        };
        let (gdone, gall) = inner.eta().map(|e| e.group_counts(&job.group)).unwrap_or((0, 0));
        let group =
            if gall > 0 && gdone == gall { format!("; {} done", job.group) } else { String::new() };
        let left = inner.eta().map(|e| human(e.left_total())).unwrap_or_default();
        eprintln!(
            "{}: [{done}/{total}] {}: {how}{group}; about {left} left",
            inner.what, job.label
        );
    }
}
