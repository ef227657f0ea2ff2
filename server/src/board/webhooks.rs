//! The owner's webhook pages (issue #29): the webhooks a human owns and where each routes its
//! deliveries, a form to register one, and the actions the API offers (rotate the signing
//! secret, delete through a confirmation page), so an owner wires a provider to a queue without
//! curl.
//!
//! The rules are the operator API's own ([`crate::webhooks::register`],
//! [`crate::webhooks::rotate_secret`]): a name or a target the API refuses is refused here too,
//! shown next to the field it names, values kept. A webhook is only ever its owner's: anyone
//! else's is the same 404 as one that does not exist. A new secret is shown once, on a page
//! that is not cached, with the time the replaced one stops being accepted.

use super::signin::{CsrfForm, Viewer, require, require_form};
use super::snapshot;
use super::view::{LocalTime, QueueRef};
use super::{Board, Nav, PageError, PageResult};
use crate::webhooks::{self, TargetText};
use crate::wire::scope_string;
use askama::Template;
use askama_web::WebTemplate;
use axum::Form;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use models::error::{Code, Error};
use models::identity::Owner;
use models::store::WebhookSummary;
use models::store::prelude::*;
use serde::Deserialize;
use std::collections::{BTreeSet, HashMap};

/// Most target lines the form suggests (the queues the viewer may route to).
const SUGGESTED_TARGETS_MAX: usize = 20;

/// One value shown once, in a readonly field with a copy button.
pub(super) struct ShownValue {
    /// The field's DOM id, which its copy button names.
    pub id: &'static str,
    pub label: &'static str,
    /// The copy button's text.
    pub copy: &'static str,
    pub value: String,
    /// The field the page opens on (the secret itself).
    pub focus: bool,
}

/// The page that shows a secret once: a new webhook's ingest URL and signing secret, a rotated
/// secret, a new operator token.
#[derive(Template, WebTemplate)]
#[template(path = "secret_once.html")]
pub(super) struct SecretPage {
    pub nav: Option<Nav>,
    pub heading: String,
    /// The list page this belongs to, for the crumbs and the way back.
    pub back_href: &'static str,
    pub back_text: &'static str,
    /// What to copy, and why now.
    pub notice: &'static str,
    pub values: Vec<ShownValue>,
    /// After a rotation: whether the replaced secret's grace is known, and its end.
    pub rotated: bool,
    pub previous_until: Option<LocalTime>,
    /// How the values are used, in a sentence.
    pub usage: &'static str,
}

impl SecretPage {
    /// The page as a response: `status`, and never stored by a cache or the back button.
    pub fn once(self, status: StatusCode) -> Response {
        let mut response = (status, self).into_response();
        response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        response
    }
}

/// The board path of webhook `id`'s actions.
fn webhook_href(id: &str) -> String {
    format!("/webhooks/{id}")
}

/// One target as the list shows it: `SCOPE/QUEUE`, linked to the queue's page.
struct TargetLine {
    text: String,
    href: String,
    title: String,
}

struct Row {
    name: String,
    href: String,
    targets: Vec<TargetLine>,
}

#[derive(Template, WebTemplate)]
#[template(path = "webhooks.html")]
struct ListPage {
    nav: Option<Nav>,
    csrf: String,
    rows: Vec<Row>,
}

/// The registration form's fields as typed, kept across a refusal.
#[derive(Deserialize, Default)]
pub struct NewWebhookForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    name: String,
    /// One target per line, `SCOPE/QUEUE`.
    #[serde(default)]
    targets: String,
}

/// A refusal, next to the field it names (or above the form when it names none).
#[derive(Default)]
struct FieldError {
    name: Option<String>,
    targets: Option<String>,
    general: Option<String>,
}

#[derive(Template, WebTemplate)]
#[template(path = "webhook_new.html")]
struct NewPage {
    nav: Option<Nav>,
    csrf: String,
    name: String,
    targets: String,
    error: FieldError,
    /// Target lines the viewer may write, as a reminder; `more` says some were left out.
    suggestions: Vec<String>,
    more: bool,
}

#[derive(Template, WebTemplate)]
#[template(path = "webhook_delete.html")]
struct DeletePage {
    nav: Option<Nav>,
    csrf: String,
    name: String,
    href: String,
}

/// `GET /webhooks`: the viewer's webhooks and where each routes its deliveries.
pub async fn list(State(state): State<Board>, headers: HeaderMap) -> PageResult {
    let viewer = require(&state, &headers).await?;
    let webhooks = state.store.list_webhooks(&viewer.scope.human.id).await?;
    let names = snapshot::names(&state.store, &viewer.scope).await?;
    let rows = webhooks
        .into_iter()
        .map(|webhook| Row {
            href: webhook_href(&webhook.id),
            targets: webhook
                .targets
                .iter()
                .map(|target| {
                    let queue = QueueRef::new(target, &names);
                    TargetLine {
                        text: format!("{}/{}", scope_string(target), target.queue),
                        href: queue.href,
                        title: queue.title,
                    }
                })
                .collect(),
            name: webhook.name,
        })
        .collect();
    Ok(ListPage { nav: Some(viewer.nav()), csrf: viewer.session.csrf_token.clone(), rows }.into_response())
}

/// The viewer's webhook `id`; anyone else's, or none, is `not_found`.
async fn owned(state: &Board, viewer: &Viewer, id: &str) -> Result<WebhookSummary, PageError> {
    let webhooks = state.store.list_webhooks(&viewer.scope.human.id).await?;
    webhooks.into_iter().find(|webhook| webhook.id == id).ok_or_else(|| PageError::from(Error::not_found()))
}

/// `GET /webhooks/new`: the registration form, empty.
pub async fn new_form(State(state): State<Board>, headers: HeaderMap) -> PageResult {
    let viewer = require(&state, &headers).await?;
    form_page(&state, &viewer, NewWebhookForm::default(), FieldError::default(), StatusCode::OK).await
}

/// `POST /webhooks/new`: registers the webhook and shows its ingest URL and secret once; a
/// refusal shows the form again with the error next to its field.
pub async fn create(State(state): State<Board>, headers: HeaderMap, Form(form): Form<NewWebhookForm>) -> PageResult {
    let viewer = require_form(&state, &headers, &form.csrf).await?;
    let lines = target_lines(&form.targets);
    let targets = lines.iter().map(|line| Ok(split_target(line))).collect();
    let webhook = match webhooks::register(&state.store, &viewer.scope, &form.name, targets).await {
        Ok(webhook) => webhook,
        Err(error) if error.code == Code::Internal => return Err(PageError::from(error)),
        Err(error) => {
            let status = StatusCode::from_u16(error.code.http_status()).unwrap_or(StatusCode::BAD_REQUEST);
            let field = field_error(&error, &lines);
            return form_page(&state, &viewer, form, field, status).await;
        }
    };
    tracing::info!(webhook = %webhook.id, human = %viewer.scope.human.id, "webhook registered from the board");
    Ok(SecretPage {
        nav: Some(viewer.nav()),
        heading: format!("{} is ready", webhook.name),
        back_href: "/webhooks",
        back_text: "Webhooks",
        notice: "Copy the signing secret now: it is shown only this once. If it is lost, rotate the webhook's secret.",
        values: vec![
            ShownValue {
                id: "ingest-url",
                label: "Ingest URL",
                copy: "Copy the ingest URL",
                value: state.public_url.absolute(&headers, &format!("/ingest/{}", webhook.id)),
                focus: false,
            },
            ShownValue {
                id: "secret",
                label: "Signing secret",
                copy: "Copy the signing secret",
                value: webhook.secret,
                focus: true,
            },
        ],
        rotated: false,
        previous_until: None,
        usage: PROVIDER_USAGE,
    }
    .once(StatusCode::CREATED))
}

/// How a provider uses the ingest URL and the secret.
const PROVIDER_USAGE: &str = "The provider posts each delivery to the ingest URL, signed with the secret \
    per Standard Webhooks (the webhook-id, webhook-timestamp and webhook-signature headers). \
    Each delivery becomes one todo in every target queue.";

/// The targets text's lines that say something, trimmed.
fn target_lines(text: &str) -> Vec<&str> {
    text.lines().map(str::trim).filter(|line| !line.is_empty()).collect()
}

/// `SCOPE/QUEUE` as the API's target: split at the last `/` (a queue name holds none). A line
/// without one is a scope with no queue, which the shared rule refuses as required.
fn split_target(line: &str) -> TargetText<'_> {
    match line.rsplit_once('/') {
        Some((scope, queue)) => TargetText { scope: Some(scope.trim()), queue: Some(queue.trim()) },
        None => TargetText { scope: Some(line), queue: None },
    }
}

/// Where a refusal shows: `name` beside the name; `targets` and `targets[i].…` beside the
/// targets, saying which line (the API's field prefix left out, as the line says it); a scope
/// that is unknown or not the viewer's (`not_found`, the same for both) beside the targets
/// too; anything else above the form.
fn field_error(error: &Error, lines: &[&str]) -> FieldError {
    let field = error.extras.get("field").and_then(|f| f.as_str()).unwrap_or("");
    if error.code == Code::NotFound {
        let message = "A target names an endpoint or a team that does not exist or that you do not manage.";
        return FieldError { targets: Some(message.to_string()), ..FieldError::default() };
    }
    if field == "name" {
        return FieldError { name: Some(error.message.clone()), ..FieldError::default() };
    }
    if field == "targets" {
        return FieldError { targets: Some(error.message.clone()), ..FieldError::default() };
    }
    let item = field
        .strip_prefix("targets[")
        .and_then(|rest| rest.split_once(']'))
        .and_then(|(index, _)| index.parse::<usize>().ok());
    match item {
        Some(index) => {
            let message = error.message.replace(&format!("targets[{index}]."), "");
            let line = lines.get(index).copied().unwrap_or("");
            FieldError { targets: Some(format!("Line {} ({line}): {message}", index + 1)), ..FieldError::default() }
        }
        None => FieldError { general: Some(error.message.clone()), ..FieldError::default() },
    }
}

async fn form_page(
    state: &Board,
    viewer: &Viewer,
    form: NewWebhookForm,
    error: FieldError,
    status: StatusCode,
) -> PageResult {
    let mut suggestions = suggested_targets(state, viewer).await?;
    let more = suggestions.len() > SUGGESTED_TARGETS_MAX;
    suggestions.truncate(SUGGESTED_TARGETS_MAX);
    let page = NewPage {
        nav: Some(viewer.nav()),
        csrf: viewer.session.csrf_token.clone(),
        name: form.name,
        targets: form.targets,
        error,
        suggestions,
        more,
    };
    Ok((status, page).into_response())
}

/// The queues of the endpoints the viewer sees that the viewer manages, as target lines: a
/// reminder of the slugs beside the form. Only a reminder: what is accepted is the shared
/// rule's to decide.
async fn suggested_targets(state: &Board, viewer: &Viewer) -> Result<Vec<String>, PageError> {
    let manages = &viewer.scope.manages;
    let teams: HashMap<String, String> =
        state.store.list_teams(&viewer.scope).await?.into_iter().map(|(team, _)| (team.id, team.slug)).collect();
    let mut lines = BTreeSet::new();
    for endpoint in state.store.list_endpoints(&viewer.scope).await? {
        for queue in endpoint.queues.iter().filter(|queue| manages.contains(queue)) {
            let scope = match &queue.owner {
                Owner::Endpoint(id) if *id == endpoint.id => format!("endpoint:{}", endpoint.slug),
                Owner::Endpoint(id) => format!("endpoint:{id}"),
                Owner::Team(id) => format!("team:{}", teams.get(id).unwrap_or(id)),
            };
            lines.insert(format!("{scope}/{}", queue.queue));
        }
    }
    Ok(lines.into_iter().collect())
}

/// `POST /webhooks/{id}/rotate`: a new signing secret, shown once, and when the old one stops
/// being accepted.
pub async fn rotate(
    State(state): State<Board>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(form): Form<CsrfForm>,
) -> PageResult {
    let viewer = require_form(&state, &headers, &form.csrf).await?;
    let webhook = owned(&state, &viewer, &id).await?;
    let (secret, previous_until) = webhooks::rotate_secret(&state.store, &viewer.scope, &webhook.id).await?;
    tracing::info!(webhook = %webhook.id, human = %viewer.scope.human.id, "webhook secret rotated from the board");
    Ok(SecretPage {
        nav: Some(viewer.nav()),
        heading: format!("A new signing secret for {}", webhook.name),
        back_href: "/webhooks",
        back_text: "Webhooks",
        notice: "Copy the new signing secret now: it is shown only this once.",
        values: vec![ShownValue {
            id: "secret",
            label: "Signing secret",
            copy: "Copy the signing secret",
            value: secret,
            focus: true,
        }],
        rotated: true,
        previous_until: previous_until.map(|at| LocalTime::new(at, viewer.zone())),
        usage: PROVIDER_USAGE,
    }
    .once(StatusCode::OK))
}

/// `GET /webhooks/{id}/delete`: what deleting does, and the button that does it.
pub async fn delete_confirm(State(state): State<Board>, headers: HeaderMap, Path(id): Path<String>) -> PageResult {
    let viewer = require(&state, &headers).await?;
    let webhook = owned(&state, &viewer, &id).await?;
    Ok(DeletePage {
        nav: Some(viewer.nav()),
        csrf: viewer.session.csrf_token.clone(),
        href: webhook_href(&webhook.id),
        name: webhook.name,
    }
    .into_response())
}

/// `POST /webhooks/{id}/delete`: deletes the webhook (its ingest URL is 404 from then on); to
/// the list.
pub async fn delete(
    State(state): State<Board>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(form): Form<CsrfForm>,
) -> PageResult {
    let viewer = require_form(&state, &headers, &form.csrf).await?;
    state.store.delete_webhook(&viewer.scope.human.id, &id).await?;
    tracing::info!(webhook = %id, human = %viewer.scope.human.id, "webhook deleted from the board");
    Ok(Redirect::to("/webhooks").into_response())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_line_splits_at_its_last_slash() {
        let target = split_target("team:ops/alerts");
        assert_eq!((target.scope, target.queue), (Some("team:ops"), Some("alerts")));
        let target = split_target("endpoint:research / inbox");
        assert_eq!((target.scope, target.queue), (Some("endpoint:research"), Some("inbox")));
        let target = split_target("endpoint:research");
        assert_eq!((target.scope, target.queue), (Some("endpoint:research"), None));
        assert_eq!(target_lines("  a/b \n\n c/d\r\n"), vec!["a/b", "c/d"]);
    }

    #[test]
    fn a_refusal_shows_beside_the_field_it_names_with_its_line() {
        let lines = ["endpoint:x/inbox", "endpoint:x/Bad"];
        let queue = Error::invalid("targets[1].queue", "targets[1].queue must be 1-64 characters of [a-z0-9._-]");
        let shown = field_error(&queue, &lines);
        assert_eq!(
            shown.targets.as_deref(),
            Some("Line 2 (endpoint:x/Bad): queue must be 1-64 characters of [a-z0-9._-]")
        );
        assert!(shown.name.is_none() && shown.general.is_none());
        let name = field_error(&Error::invalid("name", "name must be 1-100 characters"), &lines);
        assert_eq!(name.name.as_deref(), Some("name must be 1-100 characters"));
        let foreign = field_error(&Error::not_found(), &lines);
        assert!(foreign.targets.is_some_and(|m| m.contains("do not manage")));
        let other = field_error(&Error::new(Code::Conflict, "too many").with("x", json!(1)), &lines);
        assert_eq!(other.general.as_deref(), Some("too many"));
    }
}
