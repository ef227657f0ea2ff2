//! What a budget would have done (issue #29, "what-if before saving a budget"): the queue
//! identity's committed claims of a past span replayed under a proposed policy, with the same
//! [`decide`] the claim path uses, so an owner sees before saving how many of those claims would
//! have waited, for how long, and which windows would have run out and when.
//!
//! The replay's model of the past: each committed claim is a demand made at the instant it was
//! claimed, holding a slot for as long as it really did (its attempt's length). Demands are
//! served first come, first served: a demand the policy refuses waits for the next instant at
//! which `decide` admits the oldest waiting one (a slot freed, a window turned), and is then
//! charged to the window it is admitted in. Demands still waiting at the end of the span count
//! as deferred, their wait running to the end. A pure function: the board's preview and its
//! brute-force test call it alike.

use crate::admission::{Decision, Policy, Reason, Used, WindowSlot, decide};
use chrono::{DateTime, TimeDelta, Utc};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// One committed claim of the past: when it was claimed and how long it held its slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PastClaim {
    pub claimed_at: DateTime<Utc>,
    pub held_for: TimeDelta,
}

/// A window the proposed policy's limit would have used up, and the instant it ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExhaustedWindow {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub exhausted_at: DateTime<Utc>,
}

/// What the replay found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replay {
    /// Claims replayed.
    pub claims: usize,
    /// Claims that would have waited at all.
    pub deferred: usize,
    /// Of those, still waiting when the span ended.
    pub still_waiting: usize,
    pub longest_wait: TimeDelta,
    /// The median wait of the deferred claims (zero when none waited).
    pub median_wait: TimeDelta,
    /// Windows that would have run out, oldest first.
    pub exhausted: Vec<ExhaustedWindow>,
}

/// Replays `claims` (any order) under `policy` until `until`; see the module doc.
pub fn replay(policy: &Policy, claims: &[PastClaim], until: DateTime<Utc>) -> Replay {
    let mut arrivals: Vec<PastClaim> = claims.iter().copied().filter(|c| c.claimed_at <= until).collect();
    arrivals.sort_by_key(|c| c.claimed_at);
    let mut world = World::new(policy);
    let mut next_arrival = 0;
    let mut now = match arrivals.first() {
        Some(first) => first.claimed_at,
        None => return world.finish(0, until),
    };
    loop {
        world.step(now);
        while next_arrival < arrivals.len() && arrivals[next_arrival].claimed_at <= now {
            world.waiting.push_back(arrivals[next_arrival]);
            next_arrival += 1;
        }
        world.admit(now);
        let upcoming = [arrivals.get(next_arrival).map(|c| c.claimed_at), world.next_change(now)];
        match upcoming.into_iter().flatten().min() {
            Some(next) if next <= until => now = next,
            _ => return world.finish(arrivals.len(), until),
        }
    }
}

/// The replay's state at one instant.
struct World<'a> {
    policy: &'a Policy,
    waiting: VecDeque<PastClaim>,
    /// When each admitted claim frees its slot.
    releases: BinaryHeap<Reverse<DateTime<Utc>>>,
    /// Each window's current span `(start, end)`, in slot order, when the policy charges
    /// (issue #52: the primary and every additional window), and their usage.
    windows: Vec<(WindowSlot, DateTime<Utc>, DateTime<Utc>)>,
    used: Used,
    waits: Vec<TimeDelta>,
    exhausted: Vec<ExhaustedWindow>,
}

impl<'a> World<'a> {
    fn new(policy: &'a Policy) -> World<'a> {
        World {
            policy,
            waiting: VecDeque::new(),
            releases: BinaryHeap::new(),
            windows: Vec::new(),
            used: Used::default(),
            waits: Vec::new(),
            exhausted: Vec::new(),
        }
    }

    /// Moves to `now`: frees the slots released by then and turns each window that has ended.
    fn step(&mut self, now: DateTime<Utc>) {
        while self.releases.peek().is_some_and(|Reverse(at)| *at <= now) {
            self.releases.pop();
        }
        let windows = self.policy.charged_windows(now);
        for &(slot, start, _) in &windows {
            if !self.windows.iter().any(|&(s, known, _)| s == slot && known == start) {
                if slot == 0 {
                    self.used.primary = 0;
                } else {
                    self.used.additional[slot - 1] = 0;
                }
            }
        }
        self.windows = windows;
    }

    /// The windows whose limit the usage has reached: (slot, limit, end).
    fn spent(&self) -> impl Iterator<Item = (WindowSlot, i64, DateTime<Utc>)> + '_ {
        self.policy.windows().filter(|(slot, max, _)| self.used.of(*slot) >= *max).filter_map(|(slot, max, _)| {
            self.windows.iter().find(|(s, _, _)| *s == slot).map(|(_, _, end)| (slot, max, *end))
        })
    }

    /// Admits the oldest waiting demands for as long as `decide` admits one.
    fn admit(&mut self, now: DateTime<Utc>) {
        while let Some(head) = self.waiting.front().copied() {
            if decide(self.policy, self.releases.len() as i64, self.used) != Decision::Admit {
                return;
            }
            self.waiting.pop_front();
            if now > head.claimed_at {
                self.waits.push(now - head.claimed_at);
            }
            self.releases.push(Reverse(now + head.held_for.max(TimeDelta::zero())));
            self.charge(now);
        }
    }

    /// One admitted claim's charge at `now`, to every window, noting each window it spends.
    fn charge(&mut self, now: DateTime<Utc>) {
        if !self.policy.charges() {
            return;
        }
        self.used = self.used.plus_one_charge(self.windows.len());
        for (slot, max, _) in self.policy.windows() {
            if self.used.of(slot) == max
                && let Some(&(_, start, end)) = self.windows.iter().find(|(s, _, _)| *s == slot)
            {
                self.exhausted.push(ExhaustedWindow { start, end, exhausted_at: now });
            }
        }
    }

    /// The next instant at which a waiting demand could be admitted: the refusal's own answer
    /// (a slot freed, or the window's end). None when nothing waits or nothing would change.
    fn next_change(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.waiting.front()?;
        match decide(self.policy, self.releases.len() as i64, self.used) {
            // The preview replays the policy alone; `decide` never refuses for a shared budget.
            Decision::Admit
            | Decision::Refuse(Reason::Paused | Reason::AdmissionUnavailable | Reason::SharedBudgetExhausted) => None,
            // Every spent window must turn: the latest of their ends (issue #52).
            Decision::Refuse(Reason::WindowExhausted) => {
                self.spent().map(|(_, _, end)| end).max().filter(|end| *end > now)
            }
            Decision::Refuse(Reason::InFlightFull) => self.releases.peek().map(|Reverse(at)| *at),
        }
    }

    fn finish(mut self, claims: usize, until: DateTime<Utc>) -> Replay {
        let still_waiting = self.waiting.len();
        self.waits.extend(self.waiting.iter().map(|c| until - c.claimed_at));
        self.waits.sort();
        let median_wait = match self.waits.len() {
            0 => TimeDelta::zero(),
            n if n % 2 == 1 => self.waits[n / 2],
            n => (self.waits[n / 2 - 1] + self.waits[n / 2]) / 2,
        };
        Replay {
            claims,
            deferred: self.waits.len(),
            still_waiting,
            longest_wait: self.waits.last().copied().unwrap_or_else(TimeDelta::zero),
            median_wait,
            exhausted: self.exhausted,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::WindowLimit;
    use crate::window::WindowSpec;
    use proptest::prelude::*;

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + seconds, 0).expect("in range")
    }

    fn hourly(max: i64, max_in_flight: Option<i64>) -> Policy {
        let spec = WindowSpec::parse("hour", "UTC", "00:00", None).expect("valid");
        Policy { max_in_flight, max_claims_per_window: Some(max), window: Some(spec), additional_windows: vec![] }
    }

    /// The oracle: the same rules stepped one second at a time, with nothing skipped.
    fn brute_force(policy: &Policy, claims: &[PastClaim], until: DateTime<Utc>) -> Replay {
        let mut sorted = claims.to_vec();
        sorted.sort_by_key(|c| c.claimed_at);
        let Some(first) = sorted.first() else { return World::new(policy).finish(0, until) };
        let mut world = World::new(policy);
        let mut next = 0;
        let mut now = first.claimed_at;
        while now <= until {
            world.step(now);
            while next < sorted.len() && sorted[next].claimed_at <= now {
                world.waiting.push_back(sorted[next]);
                next += 1;
            }
            // Admit one at a time, asking `decide` afresh, as single claims would (a claim held
            // for no time frees its slot at once).
            while let Some(head) = world.waiting.front().copied() {
                world.step(now);
                let (in_flight, used) = (world.releases.len() as i64, world.used);
                if decide(policy, in_flight, used) != Decision::Admit {
                    break;
                }
                world.waiting.pop_front();
                if now > head.claimed_at {
                    world.waits.push(now - head.claimed_at);
                }
                world.releases.push(Reverse(now + head.held_for));
                world.charge(now);
            }
            now += TimeDelta::seconds(1);
        }
        world.finish(sorted.len(), until)
    }

    #[test]
    fn an_unlimited_policy_defers_nothing() {
        let policy =
            Policy { max_in_flight: None, max_claims_per_window: None, window: None, additional_windows: vec![] };
        let claims: Vec<PastClaim> =
            (0..5).map(|i| PastClaim { claimed_at: at(i * 10), held_for: TimeDelta::seconds(100) }).collect();
        let replay = replay(&policy, &claims, at(1000));
        assert_eq!((replay.claims, replay.deferred, replay.exhausted.len()), (5, 0, 0));
    }

    #[test]
    fn a_window_of_two_defers_the_third_claim_to_the_next_hour() {
        let claims: Vec<PastClaim> =
            [0, 60, 120].iter().map(|s| PastClaim { claimed_at: at(*s), held_for: TimeDelta::seconds(1) }).collect();
        let replay = replay(&hourly(2, None), &claims, at(7200));
        // 1_800_000_000 is 08:00 UTC: the hour window ends at 09:00, 3,600 s after the first.
        assert_eq!((replay.deferred, replay.still_waiting), (1, 0));
        assert_eq!(replay.longest_wait, TimeDelta::seconds(3600 - 120));
        assert_eq!(replay.exhausted.len(), 1);
        assert_eq!(replay.exhausted[0].exhausted_at, at(60));
    }

    // Issue #52: the preview replays every window: a per-minute limit defers a burst even where
    // the hour has room, and the claim waits for the minute to turn.
    #[test]
    fn ext52_the_preview_defers_a_burst_by_its_minute_window() {
        let claims: Vec<PastClaim> =
            [0, 1, 2].iter().map(|s| PastClaim { claimed_at: at(*s), held_for: TimeDelta::seconds(1) }).collect();
        let policy = Policy {
            additional_windows: vec![WindowLimit { max_claims: 2, window: WindowSpec::MINUTE }],
            ..hourly(100, None)
        };
        let replay = replay(&policy, &claims, at(7200));
        assert_eq!((replay.deferred, replay.longest_wait), (1, TimeDelta::seconds(58)));
        assert_eq!(replay.exhausted.len(), 1);
        assert_eq!(replay.exhausted[0].end - replay.exhausted[0].start, TimeDelta::minutes(1));
    }

    #[test]
    fn a_paused_policy_leaves_every_claim_waiting_to_the_end() {
        let claims = [PastClaim { claimed_at: at(0), held_for: TimeDelta::seconds(5) }];
        let replay = replay(&hourly(0, None), &claims, at(100));
        assert_eq!((replay.deferred, replay.still_waiting), (1, 1));
        assert_eq!(replay.longest_wait, TimeDelta::seconds(100));
    }

    proptest! {
        // Issue #29: the event-skipping replay equals the second-by-second one, for any small
        // history under any window limit and in-flight cap.
        #[test]
        fn the_replay_equals_the_brute_force_one(
            claims in proptest::collection::vec((0_i64..10_800, 0_i64..2_000), 0..40),
            max in 0_i64..6,
            max_in_flight in proptest::option::of(0_i64..4),
            window in any::<bool>(),
            per_minute in proptest::option::of(1_i64..3),
        ) {
            let policy = if window {
                // Issue #52: with or without a per-minute window beside the hour.
                let minute = per_minute.map(|max_claims| WindowLimit { max_claims, window: WindowSpec::MINUTE });
                Policy { additional_windows: minute.into_iter().collect(), ..hourly(max, max_in_flight) }
            } else {
                Policy { max_in_flight, max_claims_per_window: None, window: None, additional_windows: vec![] }
            };
            let claims: Vec<PastClaim> = claims
                .iter()
                .map(|(start, held)| PastClaim { claimed_at: at(*start), held_for: TimeDelta::seconds(*held) })
                .collect();
            let until = at(14_400);
            prop_assert_eq!(replay(&policy, &claims, until), brute_force(&policy, &claims, until));
        }
    }
}
