//! The owner's endpoint pages (issue #29): the endpoints a human sees, one endpoint's queues,
//! grant and token state, and the credential actions the API offers (revoke, rotate, delete
//! through a confirmation page), so an owner needs no curl to stop or re-key an agent.
//!
//! The same store calls and the same rules as the operator API (`credentials_api`,
//! `intake_api::delete_endpoint`): only an endpoint the viewer manages can be changed, and any
//! other is the same 404 as one that does not exist. A new token is shown once, on a page that
//! is not cached. Presence, shift and notify hooks on the same page are `endpoint_push`'s.

use super::endpoint_push::PushPanel;
use super::signin::{CsrfForm, Viewer, require, require_form};
use super::snapshot;
use super::view::{Names, QueueRef};
use super::{Board, Nav, PageError, PageResult};
use crate::credentials_api;
use crate::extract::managed_endpoint;
use askama::Template;
use askama_web::WebTemplate;
use axum::Form;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use models::error::Error;
use models::identity::ScopeRef;
use models::scope::Endpoint;
use models::store::prelude::*;
use models::verbs;

/// The page that shows an endpoint's bearer once: after the vend wizard and after a rotation.
#[derive(Template, WebTemplate)]
#[template(path = "token_once.html")]
pub(super) struct TokenPage {
    pub nav: Option<Nav>,
    pub heading: String,
    pub name: String,
    pub endpoint_href: String,
    pub mcp_url: String,
    pub token: String,
}

impl TokenPage {
    /// The page as a response: `status`, and never stored by a cache or the back button.
    pub fn once(self, status: StatusCode) -> Response {
        never_stored((status, self).into_response())
    }
}

/// `response` with `Cache-Control: no-store`, for a page that shows a secret once.
pub(super) fn never_stored(mut response: Response) -> Response {
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The board path of endpoint `id`.
pub(super) fn endpoint_href(id: &str) -> String {
    format!("/endpoints/{id}")
}

struct Row {
    name: String,
    href: String,
    owner: String,
    queues: String,
    verbs: String,
    revoked: bool,
}

#[derive(Template, WebTemplate)]
#[template(path = "endpoints.html")]
struct ListPage {
    nav: Option<Nav>,
    rows: Vec<Row>,
}

struct VerbLine {
    verb: String,
    meaning: &'static str,
    warning: Option<&'static str>,
}

#[derive(Template, WebTemplate)]
#[template(path = "endpoint.html")]
pub(super) struct DetailPage {
    nav: Option<Nav>,
    csrf: String,
    id: String,
    name: String,
    href: String,
    owner: String,
    mcp_url: String,
    revoked: bool,
    manages: bool,
    queues: Vec<QueueRef>,
    verbs: Vec<VerbLine>,
    /// Presence, shift and hooks, for a viewer who manages the endpoint.
    pub(super) push: Option<PushPanel>,
}

#[derive(Template, WebTemplate)]
#[template(path = "endpoint_delete.html")]
struct DeletePage {
    nav: Option<Nav>,
    csrf: String,
    name: String,
    href: String,
}

/// Who owns `endpoint`, in words.
fn owner_words(endpoint: &Endpoint, viewer: &Viewer, names: &Names) -> String {
    match (&endpoint.owner_team_id, &endpoint.owner_human_id) {
        (Some(team), _) => format!("the team {}", names.by_owner_id.get(team).map_or(team.as_str(), String::as_str)),
        (None, Some(human)) if human == &viewer.scope.human.id => "you".to_string(),
        (None, _) => "another human".to_string(),
    }
}

/// `GET /endpoints`: every endpoint the viewer can see.
pub async fn list(State(state): State<Board>, headers: HeaderMap) -> PageResult {
    let viewer = require(&state, &headers).await?;
    let endpoints = state.store.list_endpoints(&viewer.scope).await?;
    let names = snapshot::names(&state.store, &viewer.scope).await?;
    let rows = endpoints
        .iter()
        .map(|endpoint| Row {
            name: endpoint.name.clone(),
            href: endpoint_href(&endpoint.id),
            owner: owner_words(endpoint, &viewer, &names),
            queues: endpoint.queues.iter().map(|q| q.queue.as_str()).collect::<Vec<_>>().join(", "),
            verbs: endpoint.verbs.len().to_string(),
            revoked: endpoint.revoked,
        })
        .collect();
    Ok(ListPage { nav: Some(viewer.nav()), rows }.into_response())
}

/// The endpoint `reference` names among those the viewer sees; else `not_found`.
pub(super) async fn visible(state: &Board, viewer: &Viewer, reference: &str) -> Result<Endpoint, PageError> {
    let endpoints = state.store.list_endpoints(&viewer.scope).await?;
    let found = endpoints.into_iter().find(|e| e.id == reference || e.slug == reference);
    found.ok_or_else(|| PageError::from(Error::not_found()))
}

/// `GET /endpoints/{reference}`: queues, grant, token state and, for a manager, the actions.
pub async fn show(State(state): State<Board>, headers: HeaderMap, Path(reference): Path<String>) -> PageResult {
    let viewer = require(&state, &headers).await?;
    Ok(detail(&state, &viewer, &headers, &reference).await?.into_response())
}

/// The endpoint page of `reference` as the viewer sees it now; a refused push form shows it
/// again with its errors.
pub(super) async fn detail(
    state: &Board,
    viewer: &Viewer,
    headers: &HeaderMap,
    reference: &str,
) -> Result<DetailPage, PageError> {
    let endpoint = visible(state, viewer, reference).await?;
    let names = snapshot::names(&state.store, &viewer.scope).await?;
    let manages = managed_endpoint(&state.store, &viewer.scope, endpoint.id.clone()).await.is_ok();
    let push = if manages { Some(PushPanel::load(state, &endpoint.id, viewer.zone()).await?) } else { None };
    let verbs = endpoint
        .verbs
        .iter()
        .map(|verb| VerbLine { verb: verb.clone(), meaning: verbs::meaning(verb), warning: verbs::warning(verb) })
        .collect();
    Ok(DetailPage {
        nav: Some(viewer.nav()),
        csrf: viewer.session.csrf_token.clone(),
        owner: owner_words(&endpoint, viewer, &names),
        mcp_url: state.public_url.absolute(headers, &format!("/mcp/{}", endpoint.slug)),
        href: endpoint_href(&endpoint.id),
        queues: endpoint.queues.iter().map(|q| QueueRef::new(q, &names)).collect(),
        verbs,
        revoked: endpoint.revoked,
        manages,
        push,
        id: endpoint.id,
        name: endpoint.name,
    })
}

/// The signed-in viewer and the id of the endpoint they manage, for a state-changing form: a
/// forged form is 403, and an endpoint they do not manage the same 404 as an unknown one.
pub(super) async fn managing(
    state: &Board,
    headers: &HeaderMap,
    reference: String,
    csrf: &str,
) -> Result<(Viewer, String), PageError> {
    let viewer = require_form(state, headers, csrf).await?;
    let id = managed_endpoint(&state.store, &viewer.scope, reference).await?;
    Ok((viewer, id))
}

/// `POST /endpoints/{reference}/revoke`: the token fails from now on; back to the endpoint.
pub async fn revoke(
    State(state): State<Board>,
    headers: HeaderMap,
    Path(reference): Path<String>,
    Form(form): Form<CsrfForm>,
) -> PageResult {
    let (viewer, id) = managing(&state, &headers, reference, &form.csrf).await?;
    credentials_api::revoke(&state, &id).await?;
    tracing::info!(endpoint = %id, human = %viewer.scope.human.id, "endpoint token revoked from the board");
    Ok(Redirect::to(&endpoint_href(&id)).into_response())
}

/// `POST /endpoints/{reference}/rotate`: a new token, shown once; the old one fails at once.
pub async fn rotate(
    State(state): State<Board>,
    headers: HeaderMap,
    Path(reference): Path<String>,
    Form(form): Form<CsrfForm>,
) -> PageResult {
    let (viewer, id) = managing(&state, &headers, reference, &form.csrf).await?;
    let token = credentials_api::rotate(&state, &id).await?;
    tracing::info!(endpoint = %id, human = %viewer.scope.human.id, "endpoint token rotated from the board");
    let endpoint = visible(&state, &viewer, &id).await?;
    Ok(TokenPage {
        nav: Some(viewer.nav()),
        heading: format!("A new token for {}", endpoint.name),
        mcp_url: state.public_url.absolute(&headers, &format!("/mcp/{}", endpoint.slug)),
        endpoint_href: endpoint_href(&endpoint.id),
        name: endpoint.name,
        token,
    }
    .once(StatusCode::OK))
}

/// `GET /endpoints/{reference}/delete`: what deleting removes, and the button that does it.
pub async fn delete_confirm(
    State(state): State<Board>,
    headers: HeaderMap,
    Path(reference): Path<String>,
) -> PageResult {
    let viewer = require(&state, &headers).await?;
    let id = managed_endpoint(&state.store, &viewer.scope, reference).await?;
    let endpoint = visible(&state, &viewer, &id).await?;
    Ok(DeletePage {
        nav: Some(viewer.nav()),
        csrf: viewer.session.csrf_token.clone(),
        href: endpoint_href(&endpoint.id),
        name: endpoint.name,
    }
    .into_response())
}

/// `POST /endpoints/{reference}/delete`: deletes the endpoint with its todos; to the list.
pub async fn delete(
    State(state): State<Board>,
    headers: HeaderMap,
    Path(reference): Path<String>,
    Form(form): Form<CsrfForm>,
) -> PageResult {
    let (viewer, id) = managing(&state, &headers, reference, &form.csrf).await?;
    state.store.delete_endpoint(&viewer.scope, &ScopeRef::Endpoint(id.clone())).await?;
    tracing::info!(endpoint = %id, human = %viewer.scope.human.id, "endpoint deleted from the board");
    Ok(Redirect::to("/endpoints").into_response())
}
