//! SPEC-0023 REQ-5: the one limiter every metric family routes its queue label through, so a
//! scrape carries at most a fixed number of queue names and the rest are summed as `__other__`.
//!
//! Its own module because both the settings (which keep the admitted names between scrapes) and
//! the rendering (which labels each series) use it. It must never label by anything but a queue's
//! name.

use std::collections::BTreeSet;
use std::sync::Mutex;

/// The label of every queue past the cap (values of the same series summed), and of any source or
/// outcome outside its fixed vocabulary.
/// The same text the store's counters fold overflowing queue names into, so both overflows sum
/// into one series.
pub const OTHER_LABEL: &str = models::counters::OTHER_QUEUE_LABEL;

/// SPEC-0023 REQ-5: the one limiter every family routes its queue label through. The first
/// `names_max` distinct names it sees keep their own label for the life of the process, so a
/// queue's series never hops between its name and `__other__` from one scrape to the next.
pub struct QueueLabels {
    names_max: usize,
    admitted: Mutex<BTreeSet<String>>,
}

impl QueueLabels {
    pub fn new(names_max: usize) -> QueueLabels {
        QueueLabels { names_max, admitted: Mutex::new(BTreeSet::new()) }
    }

    /// Admits the names one scrape will label, in sorted order, so which newcomers win the free
    /// slots does not depend on the order the store happened to report them in.
    pub fn resolve<'a>(&self, queues: impl IntoIterator<Item = &'a str>) -> ScrapeQueueLabels {
        // A poisoned lock only means another scrape panicked mid-insert; the set is still valid.
        let mut admitted = self.admitted.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let wanted: BTreeSet<&str> = queues.into_iter().collect();
        let mut own = BTreeSet::new();
        for queue in wanted {
            // A real queue named `__other__` would pass for the overflow; it spends no slot.
            if queue == OTHER_LABEL {
                continue;
            }
            if admitted.contains(queue) || (admitted.len() < self.names_max && admitted.insert(queue.to_string())) {
                own.insert(queue.to_string());
            }
        }
        assert!(admitted.len() <= self.names_max, "the queue label set outgrew its cap");
        ScrapeQueueLabels { own }
    }
}

/// One scrape's verdict: which queue names are labelled as themselves.
pub struct ScrapeQueueLabels {
    own: BTreeSet<String>,
}

impl ScrapeQueueLabels {
    pub fn label<'a>(&self, queue: &'a str) -> &'a str {
        if self.own.contains(queue) { queue } else { OTHER_LABEL }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // SPEC-0030 REQ-12 (SPEC-0023 REQ-5)
    #[test]
    fn req12_queue_labels_are_capped_and_stable_across_scrapes() {
        let labels = QueueLabels::new(2);
        let first = labels.resolve(["zeta", "alpha", "beta", "__other__"]);
        assert_eq!(
            ["alpha", "beta", "zeta", "__other__"].map(|q| first.label(q)),
            ["alpha", "beta", "__other__", "__other__"]
        );
        // A newcomer that sorts first cannot displace a name already admitted.
        let second = labels.resolve(["aaa", "beta", "zeta"]);
        assert_eq!(["aaa", "beta", "zeta"].map(|q| second.label(q)), ["__other__", "beta", "__other__"]);
        assert_eq!(QueueLabels::new(0).resolve(["alpha"]).label("alpha"), "__other__");
    }
}
