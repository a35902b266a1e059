//! The job plan: every (case, variant, repeat), ordered so a partial run stays paired.

use serde::{Deserialize, Serialize};

/// One logical chat request, however many attempts it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    /// Position in the plan.
    pub index: usize,
    pub case: usize,
    pub variant: usize,
    pub repeat: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub jobs: Vec<Job>,
}

impl Plan {
    /// Case-major order: all variants of a case run close together, so a run stopped early
    /// still has paired answers to compare.
    pub fn new(cases: usize, variants: &[usize], repeats: u32) -> Plan {
        let mut jobs = Vec::with_capacity(cases * variants.len() * repeats as usize);
        for case in 0..cases {
            for repeat in 0..repeats {
                for &variant in variants {
                    jobs.push(Job {
                        index: jobs.len(),
                        case,
                        variant,
                        repeat,
                    });
                }
            }
        }
        Plan { jobs }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleaves_variants_per_case() {
        let p = Plan::new(2, &[0, 2], 2);
        assert_eq!(p.jobs.len(), 8);
        let first: Vec<(usize, u32, usize)> = p.jobs[..4]
            .iter()
            .map(|j| (j.case, j.repeat, j.variant))
            .collect();
        assert_eq!(first, vec![(0, 0, 0), (0, 0, 2), (0, 1, 0), (0, 1, 2)]);
        assert!(p.jobs.iter().enumerate().all(|(i, j)| j.index == i));
    }
}
