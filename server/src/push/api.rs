//! Operator API for push (contract §3; `docs/push.md`): an endpoint's presence and shift
//! (SPEC-0022) and its notify hooks (SPEC-0024), plus the JSON both the API and the MCP
//! presence verbs answer.
//!
//! `{ref}` is an endpoint slug or id the human manages; anything else is 404 `not_found`,
//! exactly as for an endpoint that does not exist. Hooks are never in an agent's grant.

use crate::extract::ManagedEndpoint;
use crate::hook_sender;
use crate::state::AppState;
use crate::wire::{ApiResult, Args, parse_body, rfc3339};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use models::error::Result;
use models::presence::{self, Presence, Shift};
use models::push::NotifyHook;
use models::store::{OverrideBy, PresenceView, Store};
use serde_json::{Value, json};

/// `{presence, source, until, shift, pending}` (SPEC-0022's `presence` answer).
pub fn presence_json(view: &PresenceView) -> Value {
    json!({
        "presence": view.effective.presence.as_str(),
        "source": view.effective.source.as_str(),
        "until": view.effective.until.map(rfc3339),
        "shift": view.shift.as_ref().map(Shift::to_string),
        "pending": view.pending,
    })
}

pub fn hook_json(hook: &NotifyHook) -> Value {
    json!({
        "id": hook.id,
        "url": hook.url,
        "ignore_presence": hook.ignore_presence,
        "enabled": hook.enabled,
        "consecutive_failures": hook.consecutive_failures,
        "disabled_reason": hook.disabled_reason,
        "created_at": rfc3339(hook.created_at),
    })
}

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
    Ok(axum::Json(presence_json(&state.store.presence(&endpoint).await?)).into_response())
}

pub async fn put_presence<S: Store>(
    State(state): State<AppState<S>>,
    ManagedEndpoint { id: endpoint }: ManagedEndpoint,
    body: Bytes,
) -> ApiResult {
    let body = parse_body(&body)?;
    let args = Args::object(&body, "body")?;
    args.only(&["presence", "for_seconds"])?;
    let presence: Presence = args.str("presence")?.parse()?;
    let view = set_presence_from(&state.store, &endpoint, presence, args.opt_i64("for_seconds")?, OverrideBy::Operator)
        .await?;
    deliver_digest(&state);
    Ok(axum::Json(presence_json(&view)).into_response())
}

pub async fn clear_presence<S: Store>(
    State(state): State<AppState<S>>,
    ManagedEndpoint { id: endpoint }: ManagedEndpoint,
) -> ApiResult {
    let view = state.store.set_presence_override(&endpoint, None, OverrideBy::Operator).await?;
    deliver_digest(&state);
    Ok(axum::Json(presence_json(&view)).into_response())
}

pub async fn put_shift<S: Store>(
    State(state): State<AppState<S>>,
    ManagedEndpoint { id: endpoint }: ManagedEndpoint,
    body: Bytes,
) -> ApiResult {
    let body = parse_body(&body)?;
    let args = Args::object(&body, "body")?;
    args.only(&["shift"])?;
    let shift = args.opt_str("shift")?.map(Shift::parse).transpose()?;
    let view = state.store.set_shift(&endpoint, shift).await?;
    deliver_digest(&state);
    Ok(axum::Json(presence_json(&view)).into_response())
}

/// A presence change may have rung a digest on another replica's stream or this one's; the
/// sweep delivers it here at once rather than at its next tick.
fn deliver_digest<S: Store>(state: &AppState<S>) {
    state.push.capacity_changed();
}

pub async fn list_hooks<S: Store>(
    State(state): State<AppState<S>>,
    ManagedEndpoint { id: endpoint }: ManagedEndpoint,
) -> ApiResult {
    let hooks = state.store.list_hooks(&endpoint).await?;
    Ok(axum::Json(json!({ "hooks": hooks.iter().map(hook_json).collect::<Vec<_>>() })).into_response())
}

/// `POST …/hooks {url, ignore_presence?}` → 201 `{hook, secret}`: the signing secret is shown
/// once. The URL must resolve to an address hooks may call (the SSRF guard).
pub async fn add_hook<S: Store>(
    State(state): State<AppState<S>>,
    ManagedEndpoint { id: endpoint }: ManagedEndpoint,
    body: Bytes,
) -> ApiResult {
    let body = parse_body(&body)?;
    let args = Args::object(&body, "body")?;
    args.only(&["url", "ignore_presence"])?;
    let url = hook_sender::check_url(args.str("url")?)?;
    hook_sender::resolve_checked(&url, state.hook_addresses).await?;
    let secret = new_hook_secret();
    let hook = state
        .store
        .add_hook(&endpoint, url.as_str(), &secret, args.opt_bool("ignore_presence")?.unwrap_or(false))
        .await?;
    Ok((StatusCode::CREATED, axum::Json(json!({ "hook": hook_json(&hook), "secret": secret }))).into_response())
}

pub async fn remove_hook<S: Store>(
    State(state): State<AppState<S>>,
    ManagedEndpoint { id: endpoint }: ManagedEndpoint,
    Path((_, hook_id)): Path<(String, String)>,
) -> ApiResult {
    state.store.remove_hook(&endpoint, &hook_id).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `POST …/hooks/{id}/test`: one signed test call now, its outcome answered (not queued, and not
/// counted toward disabling the hook).
pub async fn test_hook<S: Store>(
    State(state): State<AppState<S>>,
    ManagedEndpoint { id: endpoint }: ManagedEndpoint,
    Path((_, hook_id)): Path<(String, String)>,
) -> ApiResult {
    let (hook, secret) = state.store.hook_for_test(&endpoint, &hook_id).await?;
    let body = json!({ "type": "hook.test", "hook_id": hook.id, "endpoint": endpoint });
    let msg_id = format!("msg_test_{}", chrono::Utc::now().timestamp_micros());
    let outcome =
        hook_sender::send(&hook.url, &secret, &msg_id, chrono::Utc::now().timestamp(), &body, state.hook_addresses)
            .await;
    let answer = match outcome {
        hook_sender::Outcome::Delivered { status } => json!({ "outcome": "delivered", "status": status }),
        hook_sender::Outcome::Failed { reason } => json!({ "outcome": "failed", "reason": reason }),
        hook_sender::Outcome::Refused { reason } => json!({ "outcome": "refused", "reason": reason }),
    };
    Ok(axum::Json(answer).into_response())
}

/// A Standard Webhooks secret: `whsec_` and 32 random bytes in base64.
fn new_hook_secret() -> String {
    use base64::Engine;
    let bytes: [u8; 32] = rand::random();
    format!("whsec_{}", base64::engine::general_purpose::STANDARD.encode(bytes))
}
