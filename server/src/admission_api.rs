//! The operator API for admission policies (SPEC-0030 REQ-10): `GET /api/v1/admission`, and
//! `GET | PUT | DELETE /api/v1/admission/{scope}/{queue}` with `.../audit`.
//!
//! Tenancy: every read and write is filtered by what the caller manages (an endpoint's owner, a
//! team's owner or admin). Anything else, foreign or absent, is the same 404 `not_found`, byte
//! for byte. Writes pass a per-human limiter (1 write/s, burst 10) and PUT bodies are capped at
//! 16 KiB (the router enforces the cap before a handler runs).

use crate::extract::{Human, ManagedQueue, managed_identity};
use crate::state::AppState;
use crate::wire::{ApiError, ApiResult, parse_body};
use crate::wire_types::requests::{PolicyRequest, read};
use crate::wire_types::{
    AdmissionBody, AuditBody, AuditRecords, Millis, Policies, PolicyDetailBody, UsageBody, WindowUsageBody,
};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use models::admission::Policy;
use models::error::Error;
use models::scope::HumanScope;
use models::store::{PolicyActor, Store};

/// Where the simulation has always found the limiter.
pub use crate::state::WriteLimiter;

/// Largest PUT body on the admission routes (SPEC-0030 Security Requirements).
pub const POLICY_BODY_LIMIT_BYTES: usize = 16 * 1024;
/// Audit records a GET of one policy carries, and the most `.../audit` returns.
const AUDIT_TAIL: i64 = 20;
const AUDIT_MAX: i64 = 500;

/// A human acting on a policy or a queue, as the audit records them.
pub(crate) fn by(human: &HumanScope) -> PolicyActor {
    PolicyActor { human_id: Some(human.human.id.clone()), endpoint_id: None }
}

/// `GET /api/v1/admission`: every policy the caller manages, with status and usage.
pub async fn list<S: Store>(State(state): State<AppState<S>>, Human(human): Human) -> ApiResult {
    let admissions = state.store.reach_admissions(&human.manages).await?;
    Ok(axum::Json(Policies { policies: admissions.iter().map(AdmissionBody::from).collect() }).into_response())
}

/// `GET /api/v1/admission/{scope}/{queue}`: policy, status, usage, the last 30 windows and the
/// audit tail.
pub async fn show<S: Store>(
    State(state): State<AppState<S>>,
    ManagedQueue { identity, .. }: ManagedQueue,
) -> ApiResult {
    let detail = state.store.policy_detail(&identity).await?;
    let status = &detail.admission.status;
    let body = AdmissionBody {
        detail: Some(PolicyDetailBody {
            usage: UsageBody { window_start: status.window_start.map(Millis), used: status.used },
            windows: detail
                .windows
                .iter()
                .map(|(start, used)| WindowUsageBody { window_start: Millis(*start), used: *used })
                .collect(),
            audit: detail.audit.iter().take(AUDIT_TAIL as usize).map(AuditBody::from).collect(),
        }),
        ..AdmissionBody::from(&detail.admission)
    };
    Ok(axum::Json(body).into_response())
}

/// `PUT /api/v1/admission/{scope}/{queue}`: full replace (or create), audited. The body is
/// judged before the queue is resolved, so a bad policy is 400 whoever's queue it names.
pub async fn put<S: Store>(
    State(state): State<AppState<S>>,
    Human(human): Human,
    Path((scope, queue)): Path<(String, String)>,
    body: Bytes,
) -> ApiResult {
    state.admission_writes.check_human(&state.store, &human.human.id).await?;
    let PolicyRequest(policy) = read(&parse_body(&body)?)?;
    let policy = Policy::from_request(&policy)?;
    let identity = managed_identity(&state.store, &human, &scope, &queue).await?;
    let actor = by(&human);
    let saved = state.store.set_policy(&identity, &policy, &actor).await?;
    // A raised limit may reopen a deferred queue at once (REQ-8).
    state.push.capacity_changed();
    Ok(axum::Json(AdmissionBody::from(&saved)).into_response())
}

/// `DELETE /api/v1/admission/{scope}/{queue}`: 204; the audit history stays readable.
pub async fn delete<S: Store>(
    State(state): State<AppState<S>>,
    ManagedQueue { human, identity }: ManagedQueue,
) -> ApiResult {
    state.admission_writes.check_human(&state.store, &human.human.id).await?;
    state.store.clear_policy(&identity, &by(&human)).await?;
    state.push.capacity_changed();
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `GET /api/v1/admission/{scope}/{queue}/audit`: who changed it, when, from what to what.
pub async fn audit<S: Store>(
    State(state): State<AppState<S>>,
    ManagedQueue { identity, .. }: ManagedQueue,
) -> ApiResult {
    let records = state.store.policy_audit(&identity, AUDIT_MAX).await?;
    if records.is_empty() {
        // A queue that never had a policy is as unknown as a foreign one.
        return Err(ApiError(Error::not_found()));
    }
    Ok(axum::Json(AuditRecords { records: records.iter().map(AuditBody::from).collect() }).into_response())
}
