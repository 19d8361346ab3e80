//! How well a predictor's classes match the classes the thresholds give the
//! test run's objects: a confusion matrix, and precision and recall per class
//! (not in the paper, which reports only the effect on pages and caches).

use crate::classes::Class;
use crate::objects::Profile;
use serde::{Deserialize, Serialize};

/// Precision and recall of one class.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct ClassScore {
    pub class: Class,
    /// Objects of this class (true), predicted to be, and both.
    pub actual: u64,
    pub predicted: u64,
    pub correct: u64,
    /// correct / predicted (None when nothing was predicted).
    pub precision: Option<f64>,
    /// correct / actual (None when no object is of this class).
    pub recall: Option<f64>,
}

/// The confusion matrix, counted in objects and in references.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Accuracy {
    /// `objects[true][predicted]`, classes in segment order.
    pub objects: [[u64; 4]; 4],
    /// The same weighted by each object's references.
    pub refs: [[u64; 4]; 4],
    /// Per class, by objects.
    pub by_objects: Vec<ClassScore>,
    /// Per class, weighted by references.
    pub by_refs: Vec<ClassScore>,
    /// Share of objects (and of references) whose class was predicted right.
    pub accuracy_objects: f64,
    pub accuracy_refs: f64,
}

fn scores(m: &[[u64; 4]; 4]) -> Vec<ClassScore> {
    Class::ALL
        .iter()
        .map(|&c| {
            let i = c.index();
            let actual: u64 = m[i].iter().sum();
            let predicted: u64 = m.iter().map(|r| r[i]).sum();
            let correct = m[i][i];
            ClassScore {
                class: c,
                actual,
                predicted,
                correct,
                precision: (predicted > 0).then(|| correct as f64 / predicted as f64),
                recall: (actual > 0).then(|| correct as f64 / actual as f64),
            }
        })
        .collect()
}

/// Compares predicted with actual classes of a run's objects.
pub fn accuracy(p: &Profile, actual: &[Class], predicted: &[Class]) -> Accuracy {
    assert_eq!(actual.len(), predicted.len());
    let mut objects = [[0u64; 4]; 4];
    let mut refs = [[0u64; 4]; 4];
    for ((o, a), q) in p.objects.iter().zip(actual).zip(predicted) {
        objects[a.index()][q.index()] += 1;
        refs[a.index()][q.index()] += o.refs();
    }
    let diag = |m: &[[u64; 4]; 4]| {
        let t: u64 = m.iter().flatten().sum();
        if t == 0 {
            0.0
        } else {
            (0..4).map(|i| m[i][i]).sum::<u64>() as f64 / t as f64
        }
    };
    Accuracy {
        by_objects: scores(&objects),
        by_refs: scores(&refs),
        accuracy_objects: diag(&objects),
        accuracy_refs: diag(&refs),
        objects,
        refs,
    }
}
