//! The seeded-bug catalog's switchboard: deliberate bugs the engine can be built with, so the
//! simulation can prove it finds them (`cargo run -p sim --release --features mutants -- mutants`).
//!
//! Each bug is taken at the place the real mistake would be made, through one named hook per
//! site: [`hooks`] for the sites in this crate (window arithmetic, the reference model's push
//! pipeline) and `engine/src/pg_store/mutant_hooks.rs` for `PgStore`'s. Production code calls the
//! hook and reads on; only the hook knows the catalog.
//!
//! Only the `sim` crate's non-default `mutants` feature compiles the switches (`--features
//! mutants`, used by the hunt alone); in every other build, `cargo test --workspace` and the
//! server's included, `active` is a constant `false`, every hook is the production answer, and
//! nothing can switch a bug on. With the feature, one bug at a time is switched on process-wide.

/// One deliberate bug, named after the mistake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Mutant {
    /// Reads in-flight and usage without the policy row lock (count-then-claim) and trusts it.
    CheckOutsideLock = 1,
    /// Charges only a todo's first claim, not every claim (REQ-3).
    ChargePerTodo,
    /// Gives the window's unit back when the holder releases (REQ-3 forbids refunds).
    RefundOnRelease,
    /// Counts the takeover candidate itself as in flight (REQ-4).
    TakeoverCountsItself,
    /// Admits as if there were no policy when the stored zone is unknown (REQ-9: fail closed).
    FailOpenUnknownZone,
    /// Starts a window at the later of two fold instants (REQ-5: the earlier one).
    FoldLatest,
    /// Creates todos again for a redelivered webhook (REQ-2/REQ-3: dedup by delivery id).
    DedupIgnored,
    /// Counts claims of every queue of the owner as this queue's in-flight (REQ-4).
    InFlightAcrossQueues,
    /// `claim_next` gives up after the first refused queue (REQ-4: go on to the others).
    ClaimNextStopsAtFirstRefusal,
    /// Decides as if the window had no usage yet (REQ-4).
    IgnoreUsage,
    /// Pushes for new and requeued work without asking whether its queue identity is deferred
    /// (REQ-8). Hooked in the model store only.
    PushWhileDeferred,
    /// Rings work without consuming its `push_due` row, so every replica's pass rings it again
    /// (REQ-8: each push is decided once). Hooked in the model store only.
    RingPerReplica,
    /// Never leases a hook call again once a replica leased it, so a call whose sender crashed
    /// is never sent (SPEC-0024: the outbox loses nothing). Hooked in the model store only.
    HookLostOnCrash,
    /// Deletes the identity's charges with its policy, so a delete and re-create refunds the
    /// window (REQ-3: no policy change refunds; issue #28).
    RefundOnRecreate,
    /// A policy write leaves the new current window's counter as it finds it, so a redefinition
    /// starts at zero although claims were committed in its span (REQ-3; issue #28).
    RedefinitionStartsAtZero,
    /// Records the reopen watch only where a claim was refused or a push withheld, as before
    /// issue #28: a claim that fills the window or the cap, a policy write that defers, the
    /// heartbeat and a hook dropped at send time watch nothing, so a reopening nobody was refused
    /// in between never rings (REQ-8). Hooked in the model store only.
    WatchOnRefusalOnly,
    /// `claim_next`'s unlocked pre-skip counts a lapsed lease as a slot, so a queue at its cap
    /// is skipped although the takeover of that lease is admitted (REQ-4; issue #28). Hooked in
    /// `PgStore` only, so the differential run sees the takeover the model makes.
    PreSkipCountsLapsed,
    /// The session pick skips a session another transaction holds (`SKIP LOCKED`), so a ring
    /// that meets the endpoint's only session busy finds nobody while its pass still consumes
    /// the watch or the due row: the ring is lost (REQ-8; issue #51, the code before the fix).
    /// Hooked in `PgStore` only; hunted by the stress run's push judge.
    RingSkipsBusySession,
    /// The reopen sweep rings a reopened identity but keeps its watch, so the next pass, on any
    /// replica, rings the same reopening again (REQ-8: exactly one ring per reopening). Hooked in
    /// `PgStore` only; hunted by the stress run's push judge.
    ReopenWatchKept,
    /// A claim charges only its primary window, not every window of the policy, so the
    /// additional windows never fill (issue #52: a claim is charged to every window; the issue's
    /// "a claim charging only the binding window").
    ChargeOneWindowOnly,
    /// The reopen sweep deletes a reopened identity's watch in a transaction of its own,
    /// committed before the ring's, so a ring that then fails (its session's row held past the
    /// lock timeout, the database gone) is never made (issue #51: a watch goes only with its
    /// ring). Hooked in `PgStore` only; hunted by the stress run's push judge.
    WatchDroppedBeforeItsRing,
    /// The forecast answers the instant a window would run out even when the window resets
    /// first (issue #52's "a forecast that ignores the window's reset": null is owed then).
    ForecastIgnoresTheReset,
}

impl Mutant {
    pub const ALL: [Mutant; 22] = [
        Mutant::CheckOutsideLock,
        Mutant::ChargePerTodo,
        Mutant::RefundOnRelease,
        Mutant::TakeoverCountsItself,
        Mutant::FailOpenUnknownZone,
        Mutant::FoldLatest,
        Mutant::DedupIgnored,
        Mutant::InFlightAcrossQueues,
        Mutant::ClaimNextStopsAtFirstRefusal,
        Mutant::IgnoreUsage,
        Mutant::PushWhileDeferred,
        Mutant::RingPerReplica,
        Mutant::HookLostOnCrash,
        Mutant::RefundOnRecreate,
        Mutant::RedefinitionStartsAtZero,
        Mutant::WatchOnRefusalOnly,
        Mutant::PreSkipCountsLapsed,
        Mutant::RingSkipsBusySession,
        Mutant::ReopenWatchKept,
        Mutant::ChargeOneWindowOnly,
        Mutant::WatchDroppedBeforeItsRing,
        Mutant::ForecastIgnoresTheReset,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Mutant::CheckOutsideLock => "check-outside-the-lock",
            Mutant::ChargePerTodo => "charge-once-per-todo",
            Mutant::RefundOnRelease => "refund-on-release",
            Mutant::TakeoverCountsItself => "takeover-counts-itself",
            Mutant::FailOpenUnknownZone => "fail-open-on-unknown-zone",
            Mutant::FoldLatest => "latest-instant-at-dst-fold",
            Mutant::DedupIgnored => "webhook-redelivery-not-deduped",
            Mutant::InFlightAcrossQueues => "in-flight-across-queues",
            Mutant::ClaimNextStopsAtFirstRefusal => "claim-next-stops-at-first-refusal",
            Mutant::IgnoreUsage => "decide-ignoring-usage",
            Mutant::PushWhileDeferred => "push-while-deferred",
            Mutant::RingPerReplica => "one-ring-per-replica",
            Mutant::HookLostOnCrash => "hook-lost-on-crash",
            Mutant::RefundOnRecreate => "refund-on-policy-recreate",
            Mutant::RedefinitionStartsAtZero => "redefinition-starts-at-zero",
            Mutant::WatchOnRefusalOnly => "watch-on-refusal-only",
            Mutant::PreSkipCountsLapsed => "pre-skip-counts-lapsed-leases",
            Mutant::RingSkipsBusySession => "ring-skips-a-busy-session",
            Mutant::ReopenWatchKept => "reopen-watch-kept-after-its-ring",
            Mutant::ChargeOneWindowOnly => "claim-charges-one-window-only",
            Mutant::WatchDroppedBeforeItsRing => "watch-dropped-before-its-ring",
            Mutant::ForecastIgnoresTheReset => "forecast-ignores-the-reset",
        }
    }

    /// Whether the bug lives in push delivery on `PgStore` under real concurrency, where only
    /// the stress run's push judge can see it (issue #51).
    pub fn push_stress_only(self) -> bool {
        matches!(self, Mutant::RingSkipsBusySession | Mutant::ReopenWatchKept | Mutant::WatchDroppedBeforeItsRing)
    }

    /// Whether the bug is hooked only in the reference `ModelStore` (the push pipeline's bugs):
    /// those are hunted on model runs, since a PostgreSQL run never contains them.
    pub fn model_store_only(self) -> bool {
        matches!(
            self,
            Mutant::PushWhileDeferred | Mutant::RingPerReplica | Mutant::HookLostOnCrash | Mutant::WatchOnRefusalOnly
        )
    }
}

#[cfg(feature = "mutants")]
static ACTIVE: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// Switches one bug on (or all off with `None`), process-wide.
#[cfg(feature = "mutants")]
pub fn activate(mutant: Option<Mutant>) {
    ACTIVE.store(mutant.map_or(0, |m| m as u8), std::sync::atomic::Ordering::SeqCst);
}

/// Whether `mutant` is switched on. Always false without the `mutants` feature.
#[inline]
pub fn active(mutant: Mutant) -> bool {
    #[cfg(feature = "mutants")]
    {
        ACTIVE.load(std::sync::atomic::Ordering::SeqCst) == mutant as u8
    }
    #[cfg(not(feature = "mutants"))]
    {
        let _ = mutant;
        false
    }
}

/// The hooks of the sites in `models`. Each is the production answer unless its bug is on.
pub mod hooks {
    use super::{Mutant, active};

    /// A window anchor the clock passes twice (a DST fold): whether to take the later instant
    /// (`FoldLatest`; REQ-5 takes the earlier).
    pub fn fold_takes_later_instant() -> bool {
        active(Mutant::FoldLatest)
    }

    /// The model's hook outbox: whether a lapsed lease stays taken instead of free to take over
    /// (`HookLostOnCrash`; SPEC-0024: the outbox loses nothing).
    pub fn lapsed_hook_leases_stay_taken() -> bool {
        active(Mutant::HookLostOnCrash)
    }

    /// The model's push dispatch: whether ringing leaves the `push_due` row in place, so every
    /// replica's pass rings again (`RingPerReplica`; REQ-8: each push is decided once).
    pub fn rings_leave_push_due() -> bool {
        active(Mutant::RingPerReplica)
    }

    /// A policy delete: whether the identity's charges go with it (`RefundOnRecreate`; REQ-3
    /// keeps every charge through any policy change).
    pub fn policy_delete_refunds() -> bool {
        active(Mutant::RefundOnRecreate)
    }

    /// A policy write: whether to skip rebuilding the new current window's counter from the
    /// ledger (`RedefinitionStartsAtZero`; REQ-3 counts the claims already in its span).
    pub fn redefinition_starts_at_zero() -> bool {
        active(Mutant::RedefinitionStartsAtZero)
    }

    /// A window's forecast: whether an instant past the window's reset is answered instead of
    /// none (`ForecastIgnoresTheReset`; issue #52 forecasts only what runs out before the reset).
    pub fn forecast_ignores_the_reset() -> bool {
        active(Mutant::ForecastIgnoresTheReset)
    }

    /// A claim's charge: whether only the primary window is charged (`ChargeOneWindowOnly`;
    /// issue #52 charges every window).
    pub fn charges_one_window_only() -> bool {
        active(Mutant::ChargeOneWindowOnly)
    }

    /// The model's reopen watch: whether only a refused claim or a withheld push records it
    /// (`WatchOnRefusalOnly`; REQ-8 watches every deferral, in the transaction that makes it).
    pub fn watch_on_refusal_only() -> bool {
        active(Mutant::WatchOnRefusalOnly)
    }

    /// The model's push dispatch: whether to skip asking which identities are deferred
    /// (`PushWhileDeferred`; REQ-8 withholds pushes for deferred queues).
    pub fn pushes_ignore_deferral() -> bool {
        active(Mutant::PushWhileDeferred)
    }
}
