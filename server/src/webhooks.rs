//! Webhooks (contract §4): `POST /api/v1/webhooks` registers one with its targets, and
//! `POST /ingest/{id}` takes a delivery signed per Standard Webhooks (verified by the
//! `standardwebhooks` crate: HMAC-SHA256 over "id.timestamp.body", constant-time comparison,
//! 5-minute timestamp tolerance). One delivery fans out to one todo per target queue identity,
//! each governed only by its own policy (SPEC-0030 REQ-2); a redelivery of the same delivery id
//! creates nothing and charges nothing (REQ-3). Nothing a delivery carries can change a policy.
//!
//! The rules for registering a webhook and rotating its secret live here once ([`register`],
//! [`rotate_secret`]): the operator API and the board's webhook pages both call them, so a
//! name or a target one refuses the other refuses too, naming the same field.

use crate::extract::Human;
use crate::state::AppState;
use crate::wire::{ApiError, ApiResult, parse_body};
use crate::wire_types::requests::{WebhookRequest, read};
use crate::wire_types::{IngestedBody, Millis, SecretRotated, TargetBody, WebhookBody, WebhookCreated, Webhooks};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use base64::Engine;
use chrono::{DateTime, Utc};
use models::error::{Code, Error, Result};
use models::identity::{QueueIdentity, ScopeRef, validate_queue_name};
use models::scope::HumanScope;
use models::storable::storable_value;
use models::store::Store;
use models::todo::{
    CreatedByKind, IDEMPOTENCY_KEY_BYTES_MAX, INGEST_KEY_PREFIX, MAX_ATTEMPTS_DEFAULT, NewTodo, TITLE_LENGTH_MAX,
};
use rand::RngCore;
use serde_json::Value;

/// How far a delivery's `webhook-timestamp` may be from now (the Standard Webhooks tolerance).
const TIMESTAMP_TOLERANCE_SECONDS: u64 = 5 * 60;

/// Longest webhook name accepted (after trimming).
const WEBHOOK_NAME_LENGTH_MAX: usize = 100;

/// Most targets one webhook fans out to.
const TARGETS_MAX: usize = 50;

/// A fresh signing secret: `whsec_` and 192 random bits in base64.
fn new_secret() -> String {
    let mut key = [0_u8; 24];
    rand::rng().fill_bytes(&mut key);
    format!("whsec_{}", base64::engine::general_purpose::STANDARD.encode(key))
}

/// `GET /api/v1/webhooks`: the caller's webhooks `{webhooks: [{id, name, targets}]}`, never the
/// secret.
pub async fn list<S: Store>(State(state): State<AppState<S>>, Human(human): Human) -> ApiResult {
    let webhooks = state.store.list_webhooks(&human.human.id).await?;
    Ok(axum::Json(Webhooks { webhooks: webhooks.iter().map(WebhookBody::from).collect() }).into_response())
}

/// `DELETE /api/v1/webhooks/{id}`: deletes one of the caller's webhooks; its ingest URL is 404
/// from then on. Someone else's webhook is the same 404 as an unknown one.
pub async fn delete<S: Store>(
    State(state): State<AppState<S>>,
    Human(human): Human,
    Path(id): Path<String>,
) -> ApiResult {
    state.store.delete_webhook(&human.human.id, &id).await?;
    tracing::info!(webhook = %id, human = %human.human.id, "webhook deleted");
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `POST /api/v1/webhooks/{id}/rotate`: a new signing secret, shown once, as `{secret,
/// previous_secret_expires_at}`. Deliveries signed with the old one are still accepted until
/// then (`WEBHOOK_SECRET_GRACE_SECONDS`, issue #14), so a provider not yet switched loses none.
pub async fn rotate<S: Store>(
    State(state): State<AppState<S>>,
    Human(human): Human,
    Path(id): Path<String>,
) -> ApiResult {
    let (secret, expires_at) = rotate_secret(&state.store, &human, &id).await?;
    Ok(axum::Json(SecretRotated { secret, previous_secret_expires_at: expires_at.map(Millis) }).into_response())
}

/// Replaces the signing secret of `human`'s webhook `id`: the new secret (shown once) and when
/// the replaced one stops verifying deliveries. Someone else's webhook is the same `not_found`
/// as an unknown one. The operator API and the board both rotate through here.
pub(crate) async fn rotate_secret<S: Store>(
    store: &S,
    human: &HumanScope,
    id: &str,
) -> Result<(String, Option<DateTime<Utc>>)> {
    let secret = new_secret();
    store.rotate_webhook_secret(&human.human.id, id, &secret).await?;
    tracing::info!(webhook = %id, human = %human.human.id, "webhook secret rotated");
    // The grace's end as the store recorded it (on its clock), read back because the rotation
    // does not answer it. The rotation has committed, so a failed read must not hide the new
    // secret, which is shown only once: the end is None then.
    let expires_at = match store.webhook_for_ingest_unscoped(id).await {
        Ok(route) => route.and_then(|route| route.previous_secret).map(|previous| previous.expires_at),
        Err(error) => {
            tracing::warn!(webhook = %id, %error, "rotated, but the grace's end could not be read back");
            None
        }
    };
    Ok((secret, expires_at))
}

/// `POST /api/v1/webhooks {name, targets: [{scope, queue}]}` → `201 {id, ingest_url, secret}`.
/// Targets must be queues the caller manages (owners and team admins route work).
pub async fn create<S: Store>(
    State(state): State<AppState<S>>,
    Human(human): Human,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult {
    let WebhookRequest { name, targets } = read(&parse_body(&body)?)?;
    // Anything but a list is no targets at all, which `register` refuses as `targets`.
    let listed = targets.as_array().map_or(&[][..], Vec::as_slice);
    let targets = listed
        .iter()
        .enumerate()
        .map(|(i, target)| {
            let field = format!("targets[{i}]");
            let target =
                target.as_object().ok_or_else(|| Error::invalid(&field, format!("{field} must be a JSON object")))?;
            // A half that is missing or not a string is refused as required, in its turn.
            Ok(TargetText {
                scope: target.get("scope").and_then(Value::as_str),
                queue: target.get("queue").and_then(Value::as_str),
            })
        })
        .collect();
    let webhook = register(&state.store, &human, &name, targets).await?;
    let ingest_url = state.public_url.absolute(&headers, &format!("/ingest/{}", webhook.id));
    Ok((
        StatusCode::CREATED,
        axum::Json(WebhookCreated {
            targets: webhook.targets.iter().map(TargetBody::from).collect(),
            id: webhook.id,
            name: webhook.name,
            ingest_url,
            secret: webhook.secret,
        }),
    )
        .into_response())
}

/// One target as its caller wrote it: a scope (`endpoint:<slug-or-id>` or `team:<slug-or-id>`)
/// and a queue name. A half the caller's format left out is `None`.
pub(crate) struct TargetText<'a> {
    pub scope: Option<&'a str>,
    pub queue: Option<&'a str>,
}

/// A webhook just registered: what its owner is shown, the secret this once only.
pub(crate) struct Registered {
    pub id: String,
    pub name: String,
    pub secret: String,
    pub targets: Vec<QueueIdentity>,
}

/// Registers a webhook owned by `human`, fanning out to `targets`: the one rule of the operator
/// API and the board. The name is 1-[`WEBHOOK_NAME_LENGTH_MAX`] characters once trimmed; there
/// are 1-[`TARGETS_MAX`] targets, each a scope the human manages (any other is the same
/// `not_found` as an unknown one) and a valid queue name; repeated targets count once.
///
/// Refusals name the field as the API writes it: `name`, `targets`, `targets[i].scope`,
/// `targets[i].queue`. An `Err` item is a target the caller's format could not read at all,
/// refused in its turn.
pub(crate) async fn register<S: Store>(
    store: &S,
    human: &HumanScope,
    name: &str,
    targets: Vec<Result<TargetText<'_>>>,
) -> Result<Registered> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > WEBHOOK_NAME_LENGTH_MAX {
        return Err(Error::invalid("name", format!("name must be 1-{WEBHOOK_NAME_LENGTH_MAX} characters")));
    }
    if targets.is_empty() || targets.len() > TARGETS_MAX {
        return Err(Error::invalid(
            "targets",
            format!("targets must list 1-{TARGETS_MAX} targets, each a scope and a queue"),
        ));
    }
    let mut identities: Vec<QueueIdentity> = Vec::new();
    for (i, target) in targets.into_iter().enumerate() {
        let target = target?;
        let field = format!("targets[{i}]");
        let required = |key: &str, value: Option<&str>| -> Result<String> {
            value
                .map(str::to_string)
                .ok_or_else(|| Error::invalid(&format!("{field}.{key}"), format!("{key} is required")))
        };
        let scope = ScopeRef::parse(&format!("{field}.scope"), &required("scope", target.scope)?)?;
        let queue = required("queue", target.queue)?;
        validate_queue_name(&format!("{field}.queue"), &queue)?;
        let owner = store.resolve_scope(&human.manages, &scope).await?;
        let identity = QueueIdentity { owner, queue };
        if !identities.contains(&identity) {
            identities.push(identity);
        }
    }
    let secret = new_secret();
    let id = store.create_webhook(&human.human.id, name, &secret, &identities).await?;
    tracing::info!(webhook = %id, human = %human.human.id, targets = identities.len(), "webhook registered");
    Ok(Registered { id, name: name.to_string(), secret, targets: identities })
}

/// `POST /ingest/{webhook_id}`: verify, dedup on the delivery id, fan out. `202 {todos, deduped}`.
pub async fn ingest<S: Store>(
    State(state): State<AppState<S>>,
    Path(webhook_id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult {
    // An unknown webhook and a bad signature both reveal nothing beyond "not accepted".
    let refuse = || ApiError(Error::new(Code::Unauthenticated, "the delivery's signature does not verify"));
    // No webhook id holds a NUL (the database could not even be asked about one).
    if webhook_id.contains('\0') {
        return Err(ApiError(Error::not_found()));
    }
    let Some(route) = state.store.webhook_for_ingest_unscoped(&webhook_id).await? else {
        return Err(ApiError(Error::not_found()));
    };
    let verifier = standardwebhooks::Webhook::new(&route.secret).map_err(|_| refuse())?;
    // The signature library subtracts the timestamp from now unchecked: a far-off value must
    // not reach it. Anything outside the tolerance is refused like a bad signature.
    let timestamp_fresh = headers
        .get("webhook-timestamp")
        .and_then(|value| value.to_str().ok())
        .and_then(|text| text.parse::<i64>().ok())
        .and_then(|sent| chrono::Utc::now().timestamp().checked_sub(sent))
        .is_some_and(|skew| skew.unsigned_abs() <= TIMESTAMP_TOLERANCE_SECONDS);
    if !timestamp_fresh {
        tracing::info!(webhook = %webhook_id, "webhook delivery refused: timestamp missing or out of tolerance");
        return Err(refuse());
    }
    if let Err(problem) = verifier.verify(&body, &headers) {
        // Issue #14: a provider not yet switched after a rotation still signs with the replaced
        // secret, which the store offers only while its grace runs.
        let previous = route.previous_secret.as_ref().and_then(|p| standardwebhooks::Webhook::new(&p.secret).ok());
        if previous.is_none_or(|previous| previous.verify(&body, &headers).is_err()) {
            tracing::info!(webhook = %webhook_id, %problem, "webhook delivery refused");
            return Err(refuse());
        }
        tracing::info!(webhook = %webhook_id, "webhook delivery verified with the previous secret, in its grace");
    }
    // Every queue it fanned out to is gone (their endpoints were deleted) or no longer managed by
    // the webhook's owner (the store leaves those out): refuse, recording nothing, so the provider
    // sees a failure instead of an accepted delivery that made no todo.
    if route.targets.is_empty() {
        return Err(Error::new(Code::Conflict, "this webhook has no target queue left; nothing was accepted").into());
    }
    // Verified above, so the header is present and readable. From here on the delivery is the
    // provider's word and is never refused for its content: a provider cannot correct it and
    // would retry it forever (issue #14).
    let delivery_id = headers.get("webhook-id").and_then(|v| v.to_str().ok()).ok_or_else(refuse)?;
    let delivery = delivery_key(&webhook_id, delivery_id);
    let payload: Value =
        serde_json::from_slice(&body).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
    let payload = storable_value(payload);
    let title = delivery_title(&payload, &route.name, &delivery.stored_id);
    let todos = route
        .targets
        .iter()
        .map(|identity| NewTodo {
            identity: identity.clone(),
            title: title.clone(),
            payload: Some(payload.clone()),
            idempotency_key: Some(delivery.idempotency_key.clone()),
            max_attempts: MAX_ATTEMPTS_DEFAULT,
            created_by_kind: CreatedByKind::Ingest,
            created_by_id: Some(webhook_id.clone()),
        })
        .collect();
    let ingested = state.store.ingest(&webhook_id, &delivery.stored_id, todos).await?;
    if !ingested.deduped {
        state.push.work_added();
    }
    Ok((StatusCode::ACCEPTED, axum::Json(IngestedBody::from(&ingested))).into_response())
}

/// How a delivery id is stored: as sent when it fits the dedup table and the todo key, otherwise
/// (empty, or so long that `wh:{webhook}:{delivery}` would pass the key limit) as the SHA-256 of
/// what was sent. Either way a redelivery maps to the same key and dedups.
#[derive(Debug, PartialEq)]
struct DeliveryKey {
    stored_id: String,
    idempotency_key: String,
}

fn delivery_key(webhook_id: &str, delivery_id: &str) -> DeliveryKey {
    let key_of = |id: &str| format!("{INGEST_KEY_PREFIX}{webhook_id}:{id}");
    let fits = !delivery_id.is_empty() && key_of(delivery_id).len() <= IDEMPOTENCY_KEY_BYTES_MAX;
    let stored_id = if fits {
        delivery_id.to_string()
    } else {
        // The hex SHA-256 that credentials are stored under serves here too.
        format!("sha256:{}", engine::pg_store::hash_token(delivery_id))
    };
    DeliveryKey { idempotency_key: key_of(&stored_id), stored_id }
}

/// The payload's `title` when it is a usable string, else `"{webhook}: delivery {id}"`; clipped
/// to the title limit. A blank or missing title never refuses a verified delivery.
fn delivery_title(payload: &Value, webhook_name: &str, delivery_id: &str) -> String {
    let given = payload.get("title").and_then(Value::as_str).map(str::trim).filter(|title| !title.is_empty());
    let title = given.map_or_else(|| format!("{webhook_name}: delivery {delivery_id}"), str::to_string);
    title.chars().take(TITLE_LENGTH_MAX).collect()
}

#[cfg(test)]
mod delivery_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_delivery_id_that_fits_is_kept_and_a_long_or_empty_one_is_hashed() {
        let short = delivery_key("wh_1", "msg_1");
        assert_eq!(short, DeliveryKey { stored_id: "msg_1".into(), idempotency_key: "wh:wh_1:msg_1".into() });
        let long_id = "m".repeat(199);
        let long = delivery_key("wh_1", &long_id);
        assert!(long.stored_id.starts_with("sha256:") && long.stored_id.len() == 71, "{long:?}");
        assert!(long.idempotency_key.len() <= IDEMPOTENCY_KEY_BYTES_MAX);
        assert_eq!(long, delivery_key("wh_1", &long_id), "a redelivery maps to the same key");
        assert_ne!(long.stored_id, delivery_key("wh_1", &"m".repeat(198)).stored_id);
        assert!(delivery_key("wh_1", "").stored_id.starts_with("sha256:"));
    }

    #[test]
    fn a_blank_or_missing_title_falls_back_to_the_delivery() {
        assert_eq!(delivery_title(&json!({"title": "  Build  "}), "ci", "m1"), "Build");
        assert_eq!(delivery_title(&json!({"title": "   "}), "ci", "m1"), "ci: delivery m1");
        assert_eq!(delivery_title(&json!({"title": 7}), "ci", "m1"), "ci: delivery m1");
        assert_eq!(delivery_title(&json!("text"), "ci", "m1"), "ci: delivery m1");
        assert_eq!(delivery_title(&json!({"title": "x".repeat(900)}), "ci", "m1").chars().count(), TITLE_LENGTH_MAX);
    }
}
