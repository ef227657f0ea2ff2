//! Operator API for push (contract §3; `docs/push.md`): an endpoint's presence and shift
//! (SPEC-0022) and its notify hooks (SPEC-0024), plus the JSON both the API and the MCP
//! presence verbs answer.
//!
//! `{ref}` is an endpoint slug or id the human manages; anything else is 404 `not_found`,
//! exactly as for an endpoint that does not exist. Hooks are never in an agent's grant.

use crate::extract::ManagedEndpoint;
use crate::hook_sender;
use crate::state::AppState;
use crate::wire::{ApiResult, parse_body};
use crate::wire_types::requests::{HookRequest, PresenceRequest, ShiftRequest, integer, read};
use crate::wire_types::{HookAdded, HookBody, HookTestBody, Hooks, PresenceBody};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use models::error::Result;
use models::presence::{self, Presence, Shift};
use models::push::NotifyHook;
use models::store::{OverrideBy, PresenceView, Store};
use reqwest::Url;
use serde_json::json;

/// Sets presence as `{presence: "in"|"out", for_seconds?}` asks: in for a while (clock-in rules),
/// or out until the shift's next boundary.
pub async fn set_presence_from<S: Store>(
    store: &S,
    endpoint_id: &str,
    presence: Presence,
    for_seconds: Option<i64>,
    by: OverrideBy,
) -> Result<PresenceView> {
    let current = store.presence(endpoint_id).await?;
    let now = chrono::Utc::now();
    let override_ = match presence {
        Presence::In => presence::clock_in(current.shift.as_ref(), now, for_seconds)?,
        Presence::Out => presence::clock_out(current.shift.as_ref(), now),
    };
    store.set_presence_override(endpoint_id, Some(override_), by).await
}

pub async fn show_presence<S: Store>(
    State(state): State<AppState<S>>,
    ManagedEndpoint { id: endpoint }: ManagedEndpoint,
) -> ApiResult {
    Ok(axum::Json(PresenceBody::from(&presence_of(&state.store, &endpoint).await?)).into_response())
}

pub async fn put_presence<S: Store>(
    State(state): State<AppState<S>>,
    ManagedEndpoint { id: endpoint }: ManagedEndpoint,
    body: Bytes,
) -> ApiResult {
    let request: PresenceRequest = read(&parse_body(&body)?)?;
    let view = set_operator_presence(&state, &endpoint, request.presence, integer(request.for_seconds)).await?;
    Ok(axum::Json(PresenceBody::from(&view)).into_response())
}

pub async fn clear_presence<S: Store>(
    State(state): State<AppState<S>>,
    ManagedEndpoint { id: endpoint }: ManagedEndpoint,
) -> ApiResult {
    let view = clear_operator_presence(&state, &endpoint).await?;
    Ok(axum::Json(PresenceBody::from(&view)).into_response())
}

pub async fn put_shift<S: Store>(
    State(state): State<AppState<S>>,
    ManagedEndpoint { id: endpoint }: ManagedEndpoint,
    body: Bytes,
) -> ApiResult {
    let request: ShiftRequest = read(&parse_body(&body)?)?;
    let view = set_shift(&state, &endpoint, request.shift.as_deref()).await?;
    Ok(axum::Json(PresenceBody::from(&view)).into_response())
}

pub async fn list_hooks<S: Store>(
    State(state): State<AppState<S>>,
    ManagedEndpoint { id: endpoint }: ManagedEndpoint,
) -> ApiResult {
    let hooks = hooks_of(&state.store, &endpoint).await?;
    Ok(axum::Json(Hooks { hooks: hooks.iter().map(HookBody::from).collect() }).into_response())
}

/// `POST …/hooks {url, ignore_presence?}` → 201 `{hook, secret}`: the signing secret is shown
/// once. The URL must resolve to an address hooks may call (the SSRF guard).
pub async fn add_hook<S: Store>(
    State(state): State<AppState<S>>,
    ManagedEndpoint { id: endpoint }: ManagedEndpoint,
    body: Bytes,
) -> ApiResult {
    let request: HookRequest = read(&parse_body(&body)?)?;
    let url = checked_hook_url(&state, &request.url).await?;
    let (hook, secret) =
        add_checked_hook(&state.store, &endpoint, &url, request.ignore_presence.unwrap_or(false)).await?;
    Ok((StatusCode::CREATED, axum::Json(HookAdded { hook: HookBody::from(&hook), secret })).into_response())
}

pub async fn remove_hook<S: Store>(
    State(state): State<AppState<S>>,
    ManagedEndpoint { id: endpoint }: ManagedEndpoint,
    Path((_, hook_id)): Path<(String, String)>,
) -> ApiResult {
    remove_hook_of(&state.store, &endpoint, &hook_id).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `POST …/hooks/{id}/test`: one signed test call now, its outcome answered (not queued, and not
/// counted toward disabling the hook).
pub async fn test_hook<S: Store>(
    State(state): State<AppState<S>>,
    ManagedEndpoint { id: endpoint }: ManagedEndpoint,
    Path((_, hook_id)): Path<(String, String)>,
) -> ApiResult {
    let (_, outcome) = test_call(&state, &endpoint, &hook_id).await?;
    let answer = match outcome {
        hook_sender::Outcome::Delivered { status } => HookTestBody::Delivered { status },
        hook_sender::Outcome::Failed { reason } => HookTestBody::Failed { reason },
        hook_sender::Outcome::Refused { reason } => HookTestBody::Refused { reason },
    };
    Ok(axum::Json(answer).into_response())
}

// What each handler above does, for an endpoint the caller has already checked the human manages
// (`crate::extract::managed_endpoint`): shared with the board's endpoint page
// (`crate::board::endpoint_push`), so a value one refuses the other refuses too, with the same
// field and words.

/// The endpoint's presence, shift and waiting work (`GET …/presence`).
pub(crate) async fn presence_of<S: Store>(store: &S, endpoint_id: &str) -> Result<PresenceView> {
    store.presence(endpoint_id).await
}

/// The owner sets presence (`PUT …/presence`): in for `for_seconds` (clock-in rules; `for` is
/// the field refused) or out until the shift's next boundary; a digest may be due at once.
pub(crate) async fn set_operator_presence<S: Store>(
    state: &AppState<S>,
    endpoint_id: &str,
    presence: Presence,
    for_seconds: Option<i64>,
) -> Result<PresenceView> {
    let view = set_presence_from(&state.store, endpoint_id, presence, for_seconds, OverrideBy::Operator).await?;
    deliver_digest(state);
    Ok(view)
}

/// The owner clears the override (`DELETE …/presence`): the shift, or the default, decides again.
pub(crate) async fn clear_operator_presence<S: Store>(state: &AppState<S>, endpoint_id: &str) -> Result<PresenceView> {
    let view = state.store.set_presence_override(endpoint_id, None, OverrideBy::Operator).await?;
    deliver_digest(state);
    Ok(view)
}

/// Sets the shift from its text (`PUT …/shift`), or removes it for `None`. Text that
/// [`Shift::parse`] refuses is `invalid_argument` on field `shift`, and nothing changes.
pub(crate) async fn set_shift<S: Store>(
    state: &AppState<S>,
    endpoint_id: &str,
    text: Option<&str>,
) -> Result<PresenceView> {
    let shift = text.map(Shift::parse).transpose()?;
    let view = state.store.set_shift(endpoint_id, shift).await?;
    deliver_digest(state);
    Ok(view)
}

/// A presence change may have rung a digest on another replica's stream or this one's; the
/// sweep delivers it here at once rather than at its next tick.
fn deliver_digest<S: Store>(state: &AppState<S>) {
    state.push.capacity_changed();
}

/// The endpoint's notify hooks (`GET …/hooks`), never with their secrets.
pub(crate) async fn hooks_of<S: Store>(store: &S, endpoint_id: &str) -> Result<Vec<NotifyHook>> {
    store.list_hooks(endpoint_id).await
}

/// A hook URL as `POST …/hooks` accepts it: its syntax, then every address its host resolves
/// to (the SSRF guard). Refusals are `invalid_argument` on field `url`.
pub(crate) async fn checked_hook_url<S: Store>(state: &AppState<S>, url: &str) -> Result<Url> {
    let url = hook_sender::check_url(url)?;
    hook_sender::resolve_checked(&url, state.hook_addresses).await?;
    Ok(url)
}

/// Adds a hook at a URL [`checked_hook_url`] passed, with a new signing secret: the hook and the
/// secret, which is never shown again. `conflict` past the endpoint's hook limit.
pub(crate) async fn add_checked_hook<S: Store>(
    store: &S,
    endpoint_id: &str,
    url: &Url,
    ignore_presence: bool,
) -> Result<(NotifyHook, String)> {
    let secret = new_hook_secret();
    let hook = store.add_hook(endpoint_id, url.as_str(), &secret, ignore_presence).await?;
    Ok((hook, secret))
}

/// Removes one of the endpoint's hooks; any other hook id is `not_found`.
pub(crate) async fn remove_hook_of<S: Store>(store: &S, endpoint_id: &str, hook_id: &str) -> Result<()> {
    store.remove_hook(endpoint_id, hook_id).await
}

/// One signed test call to one of the endpoint's hooks, now (not queued, not counted toward
/// disabling it): the hook called and what came of it. Any other hook id is `not_found`.
pub(crate) async fn test_call<S: Store>(
    state: &AppState<S>,
    endpoint_id: &str,
    hook_id: &str,
) -> Result<(NotifyHook, hook_sender::Outcome)> {
    let (hook, secret) = state.store.hook_for_test(endpoint_id, hook_id).await?;
    let body = json!({ "type": "hook.test", "hook_id": hook.id, "endpoint": endpoint_id });
    let msg_id = format!("msg_test_{}", chrono::Utc::now().timestamp_micros());
    let outcome =
        hook_sender::send(&hook.url, &secret, &msg_id, chrono::Utc::now().timestamp(), &body, state.hook_addresses)
            .await;
    Ok((hook, outcome))
}

/// A Standard Webhooks secret: `whsec_` and 32 random bytes in base64.
fn new_hook_secret() -> String {
    use base64::Engine;
    let bytes: [u8; 32] = rand::random();
    format!("whsec_{}", base64::engine::general_purpose::STANDARD.encode(bytes))
}
