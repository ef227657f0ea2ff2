//! The policy editor (SPEC-0030 REQ-11, Accessibility Requirements): a full page with server-side
//! state that works without JavaScript. A refused save shows the page again with each error next
//! to the field the store's validation names (`window.tz`, ...), values kept. Save and cancel
//! return to the queue header's edit control (`/queues/...#edit-budget`). Clearing a policy goes
//! through a confirmation page.
//!
//! The form is turned into the operator API's PUT body and validated by the same
//! `Policy::from_request`; writes pass the same per-human limiter. Owner scope only (404 else).
//!
//! "Preview" (issue #29) replays the queue's claims of the last week under the budget as typed,
//! with `models::what_if` (the claim path's `decide`), and shows how many would have waited, for
//! how long, and which windows would have run out, before anything is saved.

use super::actions::queue_path;
use super::signin::{CsrfForm, Viewer, require, require_form};
use super::snapshot;
use super::view::{LocalTime, QueueRef, zone_moment};
use super::{Board, Nav, PageError, PageResult};
use crate::extract::managed_identity;
use askama::Template;
use askama_web::WebTemplate;
use axum::Form;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect};
use chrono::TimeDelta;
use models::admission::Policy;
use models::error::{Code, Error};
use models::identity::QueueIdentity;
use models::limits::PREVIEW_HISTORY_DAYS;
use models::store::PolicyActor;
use models::store::prelude::*;
use models::what_if;
use serde::Deserialize;
use serde_json::{Value, json};

/// The editor's fields as typed, kept across a refused save.
#[derive(Deserialize, Default, Clone)]
pub struct PolicyFields {
    #[serde(default)]
    pub csrf: String,
    #[serde(default)]
    pub max_claims_per_window: String,
    #[serde(default)]
    pub period: String,
    #[serde(default)]
    pub tz: String,
    #[serde(default)]
    pub start: String,
    #[serde(default)]
    pub weekday: String,
    #[serde(default)]
    pub max_in_flight: String,
    /// Issue #52: the additional windows as the API writes them (a JSON list), empty for none.
    #[serde(default)]
    pub additional_windows: String,
    /// `preview` replays the last week under the typed budget and saves nothing; anything else
    /// saves.
    #[serde(default)]
    pub action: String,
}

impl PolicyFields {
    fn from_policy(policy: Option<&Policy>) -> PolicyFields {
        let window = policy.and_then(|p| p.window.as_ref());
        let number = |value: Option<i64>| value.map(|v| v.to_string()).unwrap_or_default();
        PolicyFields {
            csrf: String::new(),
            max_claims_per_window: number(policy.and_then(|p| p.max_claims_per_window)),
            period: window.map_or("day", |w| w.period_name()).to_string(),
            tz: window.and_then(|w| w.tz_name()).unwrap_or("UTC").to_string(),
            start: window.and_then(|w| w.start_text()).unwrap_or_else(|| "00:00".to_string()),
            weekday: window.and_then(|w| w.weekday_name()).unwrap_or("").to_string(),
            max_in_flight: number(policy.and_then(|p| p.max_in_flight)),
            additional_windows: policy
                .and_then(Policy::additional_windows_json)
                .map(|windows| windows.to_string())
                .unwrap_or_default(),
            action: String::new(),
        }
    }

    /// The PUT body the operator API would receive. A limit that is not a whole number is
    /// refused here, naming its field, before the shared validation sees the body.
    fn to_request(&self) -> Result<Value, Error> {
        let number = |field: &str, raw: &str| -> Result<Value, Error> {
            let raw = raw.trim();
            if raw.is_empty() {
                return Ok(Value::Null);
            }
            raw.parse::<i64>()
                .map(Value::from)
                .map_err(|_| Error::invalid(field, format!("{field} must be a whole number")))
        };
        let max_claims = number("max_claims_per_window", &self.max_claims_per_window)?;
        let max_in_flight = number("max_in_flight", &self.max_in_flight)?;
        let window = if max_claims.is_null() {
            Value::Null
        } else if self.period.trim() == "minute" {
            // A minute window has no zone or start; the fields the form still shows are ignored.
            json!({ "period": "minute" })
        } else {
            let weekday = if self.period == "week" { json!(self.weekday.trim()) } else { Value::Null };
            json!({ "period": self.period.trim(), "tz": self.tz.trim(), "start": self.start.trim(), "weekday": weekday })
        };
        let additional = self.additional_windows.trim();
        let additional_windows = if additional.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(additional).map_err(|_| {
                Error::invalid("additional_windows", "additional_windows must be a JSON list of {max_claims, window}")
            })?
        };
        Ok(json!({ "max_claims_per_window": max_claims, "max_in_flight": max_in_flight, "window": window,
            "additional_windows": additional_windows }))
    }
}

/// One refusal, placed next to its field (or above the form when it names none of them).
#[derive(Default)]
pub struct FieldErrors {
    pub max_claims_per_window: Option<String>,
    pub period: Option<String>,
    pub tz: Option<String>,
    pub start: Option<String>,
    pub weekday: Option<String>,
    pub max_in_flight: Option<String>,
    pub additional_windows: Option<String>,
    pub general: Option<String>,
}

impl FieldErrors {
    fn from_error(error: &Error) -> FieldErrors {
        let mut errors = FieldErrors::default();
        let message = Some(error.message.clone());
        match error.extras.get("field").and_then(Value::as_str).unwrap_or("") {
            "max_claims_per_window" => errors.max_claims_per_window = message,
            "window.period" => errors.period = message,
            "window.tz" => errors.tz = message,
            "window.start" => errors.start = message,
            "window.weekday" => errors.weekday = message,
            "max_in_flight" => errors.max_in_flight = message,
            field if field.starts_with("additional_windows") => errors.additional_windows = message,
            _ => errors.general = message,
        }
        errors
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "policy_edit.html")]
struct EditPage {
    nav: Option<Nav>,
    csrf: String,
    queue: QueueRef,
    fields: PolicyFields,
    errors: FieldErrors,
    has_policy: bool,
    preview: Option<PreviewView>,
}

/// `GET /queues/{scope}/{queue}/budget`: the editor, filled with the current policy.
pub async fn edit(
    State(state): State<Board>,
    headers: HeaderMap,
    Path((scope, queue)): Path<(String, String)>,
) -> PageResult {
    let viewer = require(&state, &headers).await?;
    let identity = managed_identity(&state.store, &viewer.scope, &scope, &queue).await?;
    let admissions = state.store.queue_admissions(std::slice::from_ref(&identity)).await?;
    let names = snapshot::names(&state.store, &viewer.scope).await?;
    let policy = admissions.first().and_then(|a| a.policy.as_ref());
    Ok(EditPage {
        nav: Some(viewer.nav()),
        csrf: viewer.session.csrf_token.clone(),
        queue: QueueRef::new(&identity, &names),
        fields: PolicyFields::from_policy(policy),
        errors: FieldErrors::default(),
        has_policy: !admissions.is_empty(),
        preview: None,
    }
    .into_response())
}

/// `POST /queues/{scope}/{queue}/budget`: full replace, audited; back to the edit control.
pub async fn save(
    State(state): State<Board>,
    headers: HeaderMap,
    Path((scope, queue)): Path<(String, String)>,
    Form(fields): Form<PolicyFields>,
) -> PageResult {
    let viewer = require_form(&state, &headers, &fields.csrf).await?;
    let identity = managed_identity(&state.store, &viewer.scope, &scope, &queue).await?;
    if fields.action == "preview" {
        return preview(&state, &viewer, &identity, fields).await;
    }
    let actor = PolicyActor { human_id: Some(viewer.scope.human.id.clone()), endpoint_id: None };
    let outcome = async {
        state.admission_writes.check_human(&state.store, &viewer.scope.human.id).await?;
        let policy = Policy::from_request(&fields.to_request()?)?;
        state.store.set_policy(&identity, &policy, &actor).await
    }
    .await;
    match outcome {
        Ok(_) => {
            // A raised limit may reopen a deferred queue at once (REQ-8), as on the API.
            state.push.capacity_changed();
            Ok(Redirect::to(&format!("{}#edit-budget", queue_path(&identity))).into_response())
        }
        Err(error) if matches!(error.code, Code::InvalidArgument | Code::RateLimited) => {
            let status = StatusCode::from_u16(error.code.http_status()).unwrap_or(StatusCode::BAD_REQUEST);
            let admissions = state.store.queue_admissions(std::slice::from_ref(&identity)).await?;
            let names = snapshot::names(&state.store, &viewer.scope).await?;
            let page = EditPage {
                nav: Some(viewer.nav()),
                csrf: viewer.session.csrf_token.clone(),
                queue: QueueRef::new(&identity, &names),
                errors: FieldErrors::from_error(&error),
                fields,
                has_policy: !admissions.is_empty(),
                preview: None,
            };
            Ok((status, page).into_response())
        }
        Err(error) => Err(PageError::from(error)),
    }
}

/// What the typed budget would have done to the last week's claims (issue #29), in words.
pub struct PreviewView {
    pub days: i64,
    pub claims: usize,
    pub deferred: usize,
    pub still_waiting: usize,
    pub longest_wait: String,
    pub median_wait: String,
    pub exhausted: Vec<(String, LocalTime)>,
    pub zone: String,
}

/// "2 h 5 min", "3 min 20 s", "40 s": a wait, to the second.
fn wait_words(wait: TimeDelta) -> String {
    let seconds = wait.num_seconds().max(0);
    let (days, hours, minutes, seconds) = (seconds / 86_400, seconds / 3600 % 24, seconds / 60 % 60, seconds % 60);
    let parts = [(days, "d"), (hours, "h"), (minutes, "min"), (seconds, "s")];
    let words: Vec<String> =
        parts.iter().filter(|(n, _)| *n > 0).map(|(n, unit)| format!("{n} {unit}")).take(2).collect();
    if words.is_empty() { "none".to_string() } else { words.join(" ") }
}

/// `action=preview`: the budget as typed, validated as a save would be, then the identity's
/// claims of the last `PREVIEW_HISTORY_DAYS` replayed under it with the claim path's
/// `decide`. Writes nothing and spends no write allowance; the form comes back as typed, so
/// "Save budget" saves what was previewed.
async fn preview(state: &Board, viewer: &Viewer, identity: &QueueIdentity, fields: PolicyFields) -> PageResult {
    let admissions = state.store.queue_admissions(std::slice::from_ref(identity)).await?;
    let names = snapshot::names(&state.store, &viewer.scope).await?;
    let mut page = EditPage {
        nav: Some(viewer.nav()),
        csrf: viewer.session.csrf_token.clone(),
        queue: QueueRef::new(identity, &names),
        fields,
        errors: FieldErrors::default(),
        has_policy: !admissions.is_empty(),
        preview: None,
    };
    let policy = match page.fields.to_request().and_then(|request| Policy::from_request(&request)) {
        Ok(policy) => policy,
        Err(error) if error.code == Code::InvalidArgument => {
            page.errors = FieldErrors::from_error(&error);
            return Ok((StatusCode::BAD_REQUEST, page).into_response());
        }
        Err(error) => return Err(PageError::from(error)),
    };
    let now = state.store.now();
    let history = state.store.claim_history(identity, now - TimeDelta::days(PREVIEW_HISTORY_DAYS)).await?;
    let replay = what_if::replay(&policy, &history, now);
    let zone = policy.window.as_ref().map_or(chrono_tz::Tz::UTC, |w| w.tz);
    page.preview = Some(PreviewView {
        days: PREVIEW_HISTORY_DAYS,
        claims: replay.claims,
        deferred: replay.deferred,
        still_waiting: replay.still_waiting,
        longest_wait: wait_words(replay.longest_wait),
        median_wait: wait_words(replay.median_wait),
        exhausted: replay
            .exhausted
            .iter()
            .map(|w| (zone_moment(w.start, zone), LocalTime::new(w.exhausted_at, viewer.zone())))
            .collect(),
        zone: zone.name().to_string(),
    });
    Ok(page.into_response())
}

impl EditPage {
    fn weekday_selected(&self, day: &str) -> bool {
        self.fields.weekday == day
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "policy_clear.html")]
struct ClearPage {
    nav: Option<Nav>,
    csrf: String,
    queue: QueueRef,
}

/// `GET /queues/{scope}/{queue}/budget/clear`: confirm removing the policy.
pub async fn clear_confirm(
    State(state): State<Board>,
    headers: HeaderMap,
    Path((scope, queue)): Path<(String, String)>,
) -> PageResult {
    let viewer = require(&state, &headers).await?;
    let identity = managed_identity(&state.store, &viewer.scope, &scope, &queue).await?;
    if state.store.queue_admissions(std::slice::from_ref(&identity)).await?.is_empty() {
        return Err(PageError::from(Error::not_found()));
    }
    let names = snapshot::names(&state.store, &viewer.scope).await?;
    Ok(ClearPage {
        nav: Some(viewer.nav()),
        csrf: viewer.session.csrf_token.clone(),
        queue: QueueRef::new(&identity, &names),
    }
    .into_response())
}

/// `POST /queues/{scope}/{queue}/budget/clear`: deletes the policy (its audit stays).
pub async fn clear(
    State(state): State<Board>,
    headers: HeaderMap,
    Path((scope, queue)): Path<(String, String)>,
    Form(form): Form<CsrfForm>,
) -> PageResult {
    let viewer = require_form(&state, &headers, &form.csrf).await?;
    state.admission_writes.check_human(&state.store, &viewer.scope.human.id).await?;
    let identity = managed_identity(&state.store, &viewer.scope, &scope, &queue).await?;
    let actor = PolicyActor { human_id: Some(viewer.scope.human.id.clone()), endpoint_id: None };
    state.store.clear_policy(&identity, &actor).await?;
    state.push.capacity_changed();
    Ok(Redirect::to(&format!("{}#edit-budget", queue_path(&identity))).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    // Issue #52: a save from the board is a full replace, so the editor carries the additional
    // windows it was shown; a minute primary window sends no zone or start.
    #[test]
    fn ext52_the_editor_keeps_additional_windows_and_a_minute_window_through_a_save() {
        let body = json!({"max_in_flight": 3, "max_claims_per_window": 60, "window": {"period": "minute"},
            "additional_windows": [{"max_claims": 5000, "window": {"period": "day", "tz": "UTC", "start": "00:00"}}]});
        let policy = Policy::from_request(&body).expect("valid");
        let fields = PolicyFields::from_policy(Some(&policy));
        let saved = Policy::from_request(&fields.to_request().expect("request")).expect("saved");
        assert_eq!(saved, policy);

        let broken = PolicyFields { additional_windows: "[{".into(), ..fields };
        let error = broken.to_request().expect_err("not JSON");
        assert_eq!(error.extras["field"], "additional_windows");
        assert!(FieldErrors::from_error(&error).additional_windows.is_some());
    }
}
