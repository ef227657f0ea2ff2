//! The `Store` and `Clock` traits: the seam between the surfaces and storage.
//!
//! Each store method is one whole transaction, so the production `PgStore`, the reference
//! `ModelStore` and the simulation's bridge can stand in for each other, and a transaction is
//! never held open across an `.await` the caller controls.
//!
//! The methods are cut along their concepts into role traits, one module each, with the types
//! their answers use: `Principals`, `Webhooks`, `Todos`, `Intake`, `Claims`, `Lifecycle`,
//! `Policies`, `SharedBudgets`, `Push`, `Presence` and `Hooks`. Each store implements a role beside the code of
//! that concept, so a new operation touches one role, not a 68-method trait. `Store` is every
//! role together plus the store's own `counters` and `ping`: what the server and the sweeps ask
//! for. Code that calls a concrete store (`PgStore`, `ModelStore`) brings the roles into scope
//! with `use models::store::prelude::*`.

mod claims;
mod clock;
mod hooks;
mod intake;
mod lifecycle;
mod policies;
mod presence;
mod principals;
mod push;
mod shared_budgets;
mod todos;
mod webhooks;

pub use claims::{ClaimNext, Claimed, ClaimedMany, Claims, DeferredQueue};
pub use clock::{Clock, ManualClock, SystemClock};
pub use hooks::Hooks;
pub use intake::Intake;
pub use lifecycle::{Lifecycle, SweepReport};
pub use policies::{AuditRecord, Policies, PolicyActor, PolicyDetail, QueueAdmission};
pub use presence::{OverrideBy, Presence, PresenceView};
pub use principals::{AgentLookup, ApiToken, NewEndpoint, Principals};
pub use push::Push;
pub use shared_budgets::SharedBudgets;
pub use todos::{TodoQuery, TodoSet, Todos};
pub use webhooks::{Ingested, PreviousSecret, WebhookRoute, WebhookSummary, Webhooks};

use crate::error::Result;
use std::future::Future;

/// A whole store: every role, plus what belongs to the store itself rather than to a concept.
/// The server, the sweeps and the simulation are generic over it, so a bound `S: Store` reaches
/// every role's methods without naming them.
pub trait Store:
    Principals
    + Webhooks
    + Todos
    + Intake
    + Claims
    + Lifecycle
    + Policies
    + SharedBudgets
    + Push
    + Presence
    + Hooks
    + Clone
    + 'static
{
    /// What this process's store committed and refused, for `/metrics`.
    fn counters(&self) -> &crate::counters::Counters;

    /// A round trip to storage, for `/healthz`.
    fn ping(&self) -> impl Future<Output = Result<()>> + Send;
}

/// `Store` and, unnamed, every role trait: for code that calls a concrete store's methods. The
/// roles come in as `_` so a glob import of this never shadows a type of the same name (such as
/// `models::presence::Presence`).
pub mod prelude {
    pub use super::Store;
    pub use super::{
        Claims as _, Hooks as _, Intake as _, Lifecycle as _, Policies as _, Presence as _, Principals as _, Push as _,
        SharedBudgets as _, Todos as _, Webhooks as _,
    };
}
