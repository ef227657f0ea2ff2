//! The cluster-wide write limiter's arithmetic (SPEC-0030 Security Requirements, issue #28): at
//! most `per_second` writes a second with bursts of `burst`, per key, for every replica at once.
//!
//! The limiter is the generic cell rate algorithm: one instant per key, the theoretical arrival
//! time (TAT) of the next write at the steady rate, so the state is one row per key that every
//! replica reads and writes in one statement (`PgStore`) or under one lock (`ModelStore`), both
//! through [`take`]. A write at `now` is admitted when the TAT is at most `tolerance` ahead of
//! `now`, and moves it one `interval` on; a refused write changes nothing and is told when the
//! next one would be admitted.

use chrono::{DateTime, TimeDelta, Utc};

/// A rate with bursts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    pub per_second: u32,
    pub burst: u32,
}

impl Quota {
    /// SPEC-0030 Security Requirements: admission policy writes, 1 per second, bursts of 10.
    pub const ADMISSION_WRITES: Quota = Quota { per_second: 1, burst: 10 };

    /// The steady spacing of writes.
    pub fn interval(self) -> TimeDelta {
        TimeDelta::microseconds(1_000_000 / i64::from(self.per_second.max(1)))
    }

    /// How far ahead of now the TAT may be and still admit: `burst - 1` intervals.
    pub fn tolerance(self) -> TimeDelta {
        self.interval() * (self.burst.max(1) as i32 - 1)
    }
}

/// The outcome of one write's check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Admitted; the key's TAT is now this.
    Admitted { tat: DateTime<Utc> },
    /// Refused; whole seconds until a write would be admitted (at least 1, for `Retry-After`).
    Refused { retry_after_seconds: u64 },
}

/// One write at `now` against the key's stored TAT (None: the key has none yet).
pub fn take(tat: Option<DateTime<Utc>>, now: DateTime<Utc>, quota: Quota) -> Verdict {
    let from = tat.map_or(now, |tat| tat.max(now));
    let ahead = from - now;
    if ahead <= quota.tolerance() {
        return Verdict::Admitted { tat: from + quota.interval() };
    }
    Verdict::Refused { retry_after_seconds: retry_after_seconds(ahead - quota.tolerance()) }
}

/// A wait rounded up to whole seconds, at least one.
pub fn retry_after_seconds(wait: TimeDelta) -> u64 {
    let micros = wait.num_microseconds().unwrap_or(i64::MAX).max(0) as u64;
    micros.div_ceil(1_000_000).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use quickcheck::quickcheck;

    fn at(micros: i64) -> DateTime<Utc> {
        DateTime::from_timestamp_micros(1_800_000_000_000_000 + micros).expect("in range")
    }

    /// Runs writes at the given instants; how many were admitted.
    fn admitted(instants: &[i64], quota: Quota) -> Vec<bool> {
        let mut tat = None;
        instants
            .iter()
            .map(|t| match take(tat, at(*t), quota) {
                Verdict::Admitted { tat: next } => {
                    tat = Some(next);
                    true
                }
                Verdict::Refused { .. } => false,
            })
            .collect()
    }

    // SPEC-0030 Security Requirements: a burst of ten passes, the eleventh waits a second, and
    // the bucket refills at one write per second.
    #[test]
    fn security_a_burst_of_ten_then_one_a_second() {
        let quota = Quota::ADMISSION_WRITES;
        let burst: Vec<i64> = (0..12).map(|i| i * 1_000).collect();
        let got = admitted(&burst, quota);
        assert_eq!(got.iter().filter(|ok| **ok).count(), 10);
        assert!(!got[10] && !got[11]);
        let mut tat = None;
        for t in &burst[..10] {
            if let Verdict::Admitted { tat: next } = take(tat, at(*t), quota) {
                tat = Some(next);
            }
        }
        assert_eq!(take(tat, at(20_000), quota), Verdict::Refused { retry_after_seconds: 1 });
        assert!(matches!(take(tat, at(1_000_000), quota), Verdict::Admitted { .. }), "one second refills one");
        assert!(matches!(take(tat, at(10_000_000), quota), Verdict::Admitted { .. }));
    }

    quickcheck! {
        // Over any window of `w` seconds, writes at arbitrary instants are admitted at most
        // `burst + w * per_second` times: the limit the Security Requirements ask for.
        fn no_window_admits_more_than_the_quota_allows(gaps: Vec<u16>, burst: u8, window_seconds: u8) -> bool {
            let quota = Quota { per_second: 1, burst: u32::from(burst % 20) + 1 };
            let mut t = 0_i64;
            let instants: Vec<i64> = gaps.iter().map(|g| { t += i64::from(*g) * 100; t }).collect();
            let got = admitted(&instants, quota);
            let admitted_at: Vec<i64> = instants.iter().zip(&got).filter(|(_, ok)| **ok).map(|(t, _)| *t).collect();
            let w = i64::from(window_seconds % 30) * 1_000_000;
            admitted_at.iter().all(|start| {
                let inside = admitted_at.iter().filter(|t| **t >= *start && **t < start + w).count() as i64;
                inside <= i64::from(quota.burst) + w / 1_000_000
            })
        }
    }
}
