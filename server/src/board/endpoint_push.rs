//! Presence, shift and notify hooks on the owner's endpoint page (issue #29, item 2): what an
//! owner otherwise does with `PUT /api/v1/endpoints/{ref}/presence`, `/shift` and `/hooks`, from
//! the page, with JavaScript off.
//!
//! The rules are the operator API's own: every write goes through `crate::push::api`'s shared
//! functions (the same shift parser, clock-in limits, hook URL and SSRF checks and store calls),
//! and only for an endpoint the viewer manages (`endpoints::managing`); any other is the same
//! 404 as one that does not exist. A refused form shows the endpoint page again with the status
//! the API would answer (400 for a bad value) and the error next to the field the shared
//! validation names (`shift`, `presence`, `for`, `url`), values kept; a saved one 303s back to
//! the page. A new hook's signing secret is shown once, on a page no cache keeps. A test call's
//! outcome is shown on the endpoint page it answers with.
//!
//! When an agent was last connected is not shown: the store offers no read of it.

use super::endpoints::{DetailPage, detail, endpoint_href, managing, never_stored, visible};
use super::signin::{CsrfForm, Viewer};
use super::view::{LocalTime, zone_moment};
use super::{Board, Nav, PageError, PageResult};
use crate::hook_sender::Outcome;
use crate::push::api as push_api;
use askama::Template;
use askama_web::WebTemplate;
use axum::Form;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use chrono_tz::Tz;
use models::error::{Code, Error};
use models::presence::{CLOCK_IN_DEFAULT_SECONDS, Presence, PresenceSource, SHIFT_EXAMPLE};
use models::push::{HOOKS_PER_ENDPOINT_MAX, NotifyHook};
use serde::Deserialize;
use serde_json::Value;

/// How long clocking in from the page may last, in seconds, and in words: all within the
/// clock-in limits, which the shared rule checks again.
const DURATIONS: [(i64, &str); 6] = [
    (900, "15 minutes"),
    (1800, "30 minutes"),
    (3600, "1 hour"),
    (7200, "2 hours"),
    (14_400, "4 hours"),
    (28_800, "8 hours"),
];

/// How many of an endpoint's MCP sessions its page lists, most recently seen first.
const SESSIONS_SHOWN: i64 = 5;

/// The endpoint page's presence and hooks part, for a viewer who manages the endpoint.
pub(super) struct PushPanel {
    pub presence: &'static str,
    pub source: &'static str,
    pub until: Option<Until>,
    pub shift: Option<String>,
    pub shift_example: &'static str,
    pub override_live: bool,
    pub pending: i64,
    pub fields: PushFields,
    pub durations: Vec<DurationChoice>,
    pub errors: PushErrors,
    pub hooks: Vec<HookRow>,
    pub hooks_max: i64,
    pub tested: Option<Tested>,
    /// The endpoint's most recently seen MCP sessions: `(began, last seen, streaming now)`.
    pub sessions: Vec<(LocalTime, LocalTime, bool)>,
}

/// When the presence next changes: in the shift's zone when there is a shift, and as a time the
/// script shows in the viewer's zone.
pub(super) struct Until {
    pub zone_text: Option<String>,
    pub local: LocalTime,
}

/// The forms' values: the saved ones, or as typed after a refusal.
pub(super) struct PushFields {
    pub presence: String,
    pub for_seconds: String,
    pub shift: String,
    pub url: String,
    pub ignore_presence: bool,
}

pub(super) struct DurationChoice {
    pub seconds: i64,
    pub words: &'static str,
    pub selected: bool,
}

/// A refusal, next to the field it names (or above its form when it names none of them).
#[derive(Default)]
pub(super) struct PushErrors {
    pub presence: Option<String>,
    pub for_seconds: Option<String>,
    pub presence_general: Option<String>,
    pub shift: Option<String>,
    pub url: Option<String>,
    pub hook_general: Option<String>,
}

/// One hook as the table shows it (never its secret).
pub(super) struct HookRow {
    pub id: String,
    pub url: String,
    pub ignore_presence: bool,
    pub enabled: bool,
    pub consecutive_failures: i32,
    pub disabled_reason: Option<String>,
    pub created: LocalTime,
    pub test_action: String,
    pub remove_action: String,
}

/// What a test call did, in words.
pub(super) struct Tested {
    pub url: String,
    pub outcome: &'static str,
    pub detail: String,
}

impl PushPanel {
    /// The endpoint's presence and hooks now, through the API's shared reads, with times in the
    /// viewer's zone.
    pub(super) async fn load(state: &Board, endpoint_id: &str, zone: Tz) -> Result<PushPanel, Error> {
        let view = push_api::presence_of(&state.store, endpoint_id).await?;
        let hooks = push_api::hooks_of(&state.store, endpoint_id).await?;
        let sessions = state.store.endpoint_sessions(endpoint_id, SESSIONS_SHOWN).await?;
        let effective = view.effective;
        let href = endpoint_href(endpoint_id);
        let mut panel = PushPanel {
            presence: effective.presence.as_str(),
            source: match effective.source {
                PresenceSource::Default => "by default (no shift and no override)",
                PresenceSource::Shift => "by its shift",
                PresenceSource::Override => "by an override (a clock-in or clock-out)",
            },
            until: effective.until.map(|until| Until {
                zone_text: view.shift.as_ref().map(|shift| zone_moment(until, shift.tz())),
                local: LocalTime::new(until, zone),
            }),
            shift: view.shift.as_ref().map(ToString::to_string),
            shift_example: SHIFT_EXAMPLE,
            override_live: effective.source == PresenceSource::Override,
            pending: view.pending,
            fields: PushFields {
                presence: effective.presence.as_str().to_string(),
                for_seconds: CLOCK_IN_DEFAULT_SECONDS.to_string(),
                shift: view.shift.as_ref().map(ToString::to_string).unwrap_or_default(),
                url: String::new(),
                ignore_presence: false,
            },
            durations: Vec::new(),
            errors: PushErrors::default(),
            hooks: hooks.iter().map(|hook| HookRow::new(hook, &href, zone)).collect(),
            hooks_max: HOOKS_PER_ENDPOINT_MAX,
            tested: None,
            sessions: sessions
                .iter()
                .map(|s| (LocalTime::new(s.created_at, zone), LocalTime::new(s.last_seen_at, zone), s.streaming))
                .collect(),
        };
        panel.choose_duration();
        Ok(panel)
    }

    /// Marks the duration the form carries as the selected one.
    fn choose_duration(&mut self) {
        self.durations = DURATIONS
            .iter()
            .map(|&(seconds, words)| DurationChoice {
                seconds,
                words,
                selected: self.fields.for_seconds == seconds.to_string(),
            })
            .collect();
    }
}

impl HookRow {
    fn new(hook: &NotifyHook, endpoint_href: &str, zone: Tz) -> HookRow {
        HookRow {
            id: hook.id.clone(),
            url: hook.url.clone(),
            ignore_presence: hook.ignore_presence,
            enabled: hook.enabled,
            consecutive_failures: hook.consecutive_failures,
            disabled_reason: hook.disabled_reason.clone(),
            created: LocalTime::new(hook.created_at, zone),
            test_action: format!("{endpoint_href}/hooks/{}/test", hook.id),
            remove_action: format!("{endpoint_href}/hooks/{}/remove", hook.id),
        }
    }
}

/// The field a refusal names (`invalid_argument`'s `field`), or "".
fn field_of(error: &Error) -> &str {
    error.extras.get("field").and_then(Value::as_str).unwrap_or("")
}

/// Whether a refusal is the form's to show next to its fields, rather than an error page.
fn shown_on_form(error: &Error) -> bool {
    matches!(error.code, Code::InvalidArgument | Code::Conflict)
}

/// The endpoint page again, answering `error`'s status, after `edit` placed the error and kept
/// the values typed.
async fn page_again(
    state: &Board,
    viewer: &Viewer,
    headers: &HeaderMap,
    endpoint_id: &str,
    error: &Error,
    edit: impl FnOnce(&mut PushPanel),
) -> PageResult {
    let status = StatusCode::from_u16(error.code.http_status()).unwrap_or(StatusCode::BAD_REQUEST);
    let page = with_panel(state, viewer, headers, endpoint_id, edit).await?;
    Ok((status, page).into_response())
}

/// The endpoint page with its push panel changed by `edit`.
async fn with_panel(
    state: &Board,
    viewer: &Viewer,
    headers: &HeaderMap,
    endpoint_id: &str,
    edit: impl FnOnce(&mut PushPanel),
) -> Result<DetailPage, PageError> {
    let mut page = detail(state, viewer, headers, endpoint_id).await?;
    if let Some(panel) = page.push.as_mut() {
        edit(panel);
        panel.choose_duration();
    }
    Ok(page)
}

/// Back to the endpoint page, at `section`.
fn back(endpoint_id: &str, section: &str) -> Response {
    Redirect::to(&format!("{}#{section}", endpoint_href(endpoint_id))).into_response()
}

#[derive(Deserialize)]
pub struct PresenceForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    presence: String,
    #[serde(default)]
    for_seconds: String,
}

/// The form's duration in seconds: none when empty; a whole number, else refused on the field.
fn for_seconds(raw: &str) -> Result<Option<i64>, Error> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Ok(None);
    }
    raw.parse().map(Some).map_err(|_| Error::invalid("for_seconds", "must be a whole number of seconds"))
}

/// `POST /endpoints/{reference}/presence`: in for a while, or out until the shift's next
/// change, as the owner's override (`PUT …/presence`).
pub async fn set_presence(
    State(state): State<Board>,
    headers: HeaderMap,
    Path(reference): Path<String>,
    Form(form): Form<PresenceForm>,
) -> PageResult {
    let (viewer, id) = managing(&state, &headers, reference, &form.csrf).await?;
    let outcome = async {
        let presence: Presence = form.presence.parse()?;
        let for_seconds = for_seconds(&form.for_seconds)?;
        push_api::set_operator_presence(&state, &id, presence, for_seconds).await
    }
    .await;
    match outcome {
        Ok(view) => {
            let presence = view.effective.presence.as_str();
            tracing::info!(endpoint = %id, human = %viewer.scope.human.id, presence, "presence set from the board");
            Ok(back(&id, "presence"))
        }
        Err(error) if shown_on_form(&error) => {
            page_again(&state, &viewer, &headers, &id, &error, |panel| {
                let message = Some(error.message.clone());
                match field_of(&error) {
                    "presence" => panel.errors.presence = message,
                    "for" | "for_seconds" => panel.errors.for_seconds = message,
                    _ => panel.errors.presence_general = message,
                }
                panel.fields.presence = form.presence.clone();
                panel.fields.for_seconds = form.for_seconds.clone();
            })
            .await
        }
        Err(error) => Err(PageError::from(error)),
    }
}

/// `POST /endpoints/{reference}/presence/clear`: the override ends; the shift (or the default)
/// decides again (`DELETE …/presence`).
pub async fn clear_presence(
    State(state): State<Board>,
    headers: HeaderMap,
    Path(reference): Path<String>,
    Form(form): Form<CsrfForm>,
) -> PageResult {
    let (viewer, id) = managing(&state, &headers, reference, &form.csrf).await?;
    push_api::clear_operator_presence(&state, &id).await?;
    tracing::info!(endpoint = %id, human = %viewer.scope.human.id, "presence override cleared from the board");
    Ok(back(&id, "presence"))
}

#[derive(Deserialize)]
pub struct ShiftForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    shift: String,
}

/// `POST /endpoints/{reference}/shift`: saves the shift as typed (`PUT …/shift`); an empty field
/// removes it. A shift the parser refuses shows the page again, 400, with the error at `shift`.
pub async fn set_shift(
    State(state): State<Board>,
    headers: HeaderMap,
    Path(reference): Path<String>,
    Form(form): Form<ShiftForm>,
) -> PageResult {
    let (viewer, id) = managing(&state, &headers, reference, &form.csrf).await?;
    let text = Some(form.shift.trim()).filter(|text| !text.is_empty());
    match push_api::set_shift(&state, &id, text).await {
        Ok(_) => {
            tracing::info!(endpoint = %id, human = %viewer.scope.human.id, "shift saved from the board");
            Ok(back(&id, "presence"))
        }
        Err(error) if shown_on_form(&error) => {
            page_again(&state, &viewer, &headers, &id, &error, |panel| {
                panel.errors.shift = Some(error.message.clone());
                panel.fields.shift = form.shift.clone();
            })
            .await
        }
        Err(error) => Err(PageError::from(error)),
    }
}

#[derive(Deserialize)]
pub struct HookForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    url: String,
    /// Present (any value) when the box is checked.
    ignore_presence: Option<String>,
}

/// The page that shows a new hook's signing secret, once.
#[derive(Template, WebTemplate)]
#[template(path = "hook_secret.html")]
struct HookSecretPage {
    nav: Option<Nav>,
    name: String,
    endpoint_href: String,
    url: String,
    secret: String,
}

/// `POST /endpoints/{reference}/hooks`: adds a hook (`POST …/hooks`) and shows its signing
/// secret once, on a page no cache keeps. A refused URL, or one hook too many, shows the endpoint
/// page again with the error next to the form.
pub async fn add_hook(
    State(state): State<Board>,
    headers: HeaderMap,
    Path(reference): Path<String>,
    Form(form): Form<HookForm>,
) -> PageResult {
    let (viewer, id) = managing(&state, &headers, reference, &form.csrf).await?;
    let ignore_presence = form.ignore_presence.is_some();
    let outcome = async {
        let url = push_api::checked_hook_url(&state, &form.url).await?;
        push_api::add_checked_hook(&state.store, &id, &url, ignore_presence).await
    }
    .await;
    match outcome {
        Ok((hook, secret)) => {
            tracing::info!(endpoint = %id, human = %viewer.scope.human.id, hook = %hook.id, "hook added from the board");
            let endpoint = visible(&state, &viewer, &id).await?;
            let shown = HookSecretPage {
                nav: Some(viewer.nav()),
                name: endpoint.name,
                endpoint_href: endpoint_href(&id),
                url: hook.url,
                secret,
            };
            Ok(never_stored(shown.into_response()))
        }
        Err(error) if shown_on_form(&error) => {
            page_again(&state, &viewer, &headers, &id, &error, |panel| {
                let message = Some(error.message.clone());
                match field_of(&error) {
                    "url" => panel.errors.url = message,
                    _ => panel.errors.hook_general = message,
                }
                panel.fields.url = form.url.clone();
                panel.fields.ignore_presence = ignore_presence;
            })
            .await
        }
        Err(error) => Err(PageError::from(error)),
    }
}

/// `POST /endpoints/{reference}/hooks/{hook_id}/test`: one signed test call now
/// (`POST …/hooks/{id}/test`); the endpoint page answers with its outcome.
pub async fn test_hook(
    State(state): State<Board>,
    headers: HeaderMap,
    Path((reference, hook_id)): Path<(String, String)>,
    Form(form): Form<CsrfForm>,
) -> PageResult {
    let (viewer, id) = managing(&state, &headers, reference, &form.csrf).await?;
    let (hook, outcome) = push_api::test_call(&state, &id, &hook_id).await?;
    let (outcome, detail) = match outcome {
        Outcome::Delivered { status } => ("delivered", format!("the receiver answered HTTP {status}")),
        Outcome::Failed { reason } => ("failed", reason),
        Outcome::Refused { reason } => ("refused", reason),
    };
    tracing::info!(endpoint = %id, human = %viewer.scope.human.id, hook = %hook.id, outcome, "hook tested from the board");
    let tested = Tested { url: hook.url, outcome, detail };
    let page = with_panel(&state, &viewer, &headers, &id, |panel| panel.tested = Some(tested)).await?;
    Ok(page.into_response())
}

/// `POST /endpoints/{reference}/hooks/{hook_id}/remove`: the hook and its waiting calls go
/// (`DELETE …/hooks/{id}`); back to the page.
pub async fn remove_hook(
    State(state): State<Board>,
    headers: HeaderMap,
    Path((reference, hook_id)): Path<(String, String)>,
    Form(form): Form<CsrfForm>,
) -> PageResult {
    let (viewer, id) = managing(&state, &headers, reference, &form.csrf).await?;
    push_api::remove_hook_of(&state.store, &id, &hook_id).await?;
    tracing::info!(endpoint = %id, human = %viewer.scope.human.id, hook = %hook_id, "hook removed from the board");
    Ok(back(&id, "hooks"))
}
