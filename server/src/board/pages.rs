//! The board's read-only pages: the board (`/`, `/board`: a table of queues, filtered and paged
//! by keyset), a queue (`/queues/{scope}/{queue}`: exact counts and its todos a page at a time),
//! a todo (`/todos/{id}`) and a policy's audit history (`.../audit`).
//!
//! Seeing follows the viewer's reach (as `GET /api/v1/todos` does); the audit history follows
//! what they manage (as `GET /api/v1/admission/.../audit` does). Outside either: 404.

use super::signin::{Viewer, require};
use super::snapshot;
use super::usage::{UsageView, windows_chart};
use super::view::{HeaderView, LocalTime, QueueRef, policy_zone, zone_moment};
use super::{Board, Nav, PageError, PageResult};
use crate::extract::managed_identity;
use askama::Template;
use askama_web::WebTemplate;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::IntoResponse;
use chrono::{DateTime, TimeDelta, Utc};
use engine::PgStore;
use engine::pg_store::TodoCursor;
use models::admission::WindowLimit;
use models::error::{Error, Result};
use models::identity::{QueueIdentity, ScopeRef, validate_queue_name};
use models::limits::{CHARGE_LEDGER_RETENTION_DAYS, DETAIL_WINDOWS_MAX, USAGE_RETENTION_DAYS};
use models::scope::Actor;
use models::store::QueueAdmission;
use models::store::prelude::*;
use models::todo::TodoState;
use models::window::WindowSpec;
use serde::Deserialize;

/// Queues one page of the board's table shows.
pub const QUEUES_PER_PAGE: usize = 50;
/// Todos one page of a queue lists.
pub const TODOS_PER_PAGE: i64 = 100;
/// The statuses the board can be filtered by, in the words the table shows.
const STATUS_FILTERS: [&str; 6] = ["admitted", "exhausted", "in-flight full", "paused", "unavailable", "no budget"];

#[derive(Template, WebTemplate)]
#[template(path = "board.html")]
struct BoardPage {
    nav: Option<Nav>,
    rows: Vec<HeaderView>,
    status: String,
    search: String,
    statuses: [&'static str; 6],
    summary: String,
    next_href: Option<String>,
    first_href: String,
    paged: bool,
}

/// The board's query: a status filter, a search and the keyset cursor (the title and key of the
/// last row of the previous page).
#[derive(Deserialize, Default)]
pub struct BoardQuery {
    #[serde(default)]
    status: String,
    #[serde(default)]
    q: String,
    after: Option<String>,
    after_key: Option<String>,
}

/// `/?status=..&q=..&after=..&after_key=..`, the board's own link with these values.
fn board_href(status: &str, search: &str, after: Option<&HeaderView>) -> String {
    let mut url = reqwest::Url::parse("http://board/").expect("a constant URL");
    {
        let mut query = url.query_pairs_mut();
        if !status.is_empty() {
            query.append_pair("status", status);
        }
        if !search.is_empty() {
            query.append_pair("q", search);
        }
        if let Some(row) = after {
            query.append_pair("after", &row.queue.title);
            query.append_pair("after_key", &row.queue.key);
        }
    }
    match url.query() {
        Some(query) if !query.is_empty() => format!("/?{query}"),
        _ => "/".to_string(),
    }
}

/// `GET /` and `GET /board`: the queues the viewer can see, one table row each (status in words,
/// used of limit, in flight, pending, resets at), filtered by status and name, a page at a time
/// by keyset over the title order.
pub async fn board(State(state): State<Board>, headers: HeaderMap, Query(query): Query<BoardQuery>) -> PageResult {
    let viewer = require(&state, &headers).await?;
    let all = snapshot::rows(&state.store, &viewer.scope, viewer.zone()).await?;
    let total = all.len();
    let status = if STATUS_FILTERS.contains(&query.status.as_str()) { query.status.clone() } else { String::new() };
    let search = query.q.trim().to_string();
    let needle = search.to_lowercase();
    let matching: Vec<HeaderView> = all
        .into_iter()
        .filter(|row| status.is_empty() || row.status_word == status)
        .filter(|row| needle.is_empty() || row.queue.title.to_lowercase().contains(&needle))
        .collect();
    let cursor = query.after.as_ref().map(|title| (title.to_lowercase(), query.after_key.clone().unwrap_or_default()));
    let start = cursor.as_ref().map_or(0, |cursor| {
        matching.partition_point(|row| (row.queue.title.to_lowercase(), row.queue.key.clone()) <= *cursor)
    });
    let rest = matching.len() - start;
    let rows: Vec<HeaderView> = matching.iter().skip(start).take(QUEUES_PER_PAGE).cloned().collect();
    let next_href = (rest > QUEUES_PER_PAGE).then(|| board_href(&status, &search, rows.last()));
    let summary = match (matching.len(), rows.len()) {
        (0, _) if total == 0 => "No queues yet.".to_string(),
        (0, _) => format!("No queue of {total} matches."),
        (count, shown) => format!(
            "Queues {} to {} of {count}{}.",
            start + 1,
            start + shown,
            if count == total { String::new() } else { format!(" matching (of {total} in all)") }
        ),
    };
    let first_href = board_href(&status, &search, None);
    Ok(BoardPage {
        nav: Some(viewer.nav()),
        rows,
        first_href,
        status,
        search,
        statuses: STATUS_FILTERS,
        summary,
        next_href,
        paged: start > 0,
    }
    .into_response())
}

/// `{scope}/{queue}` resolved within what the viewer reaches; otherwise `not_found`.
pub async fn visible_identity(store: &PgStore, viewer: &Viewer, scope: &str, queue: &str) -> Result<QueueIdentity> {
    let scope = ScopeRef::parse("scope", scope)?;
    validate_queue_name("queue", queue)?;
    let owner = store.resolve_scope(&viewer.scope.reach, &scope).await?;
    Ok(QueueIdentity { owner, queue: queue.to_string() })
}

#[derive(Template, WebTemplate)]
#[template(path = "queue.html")]
struct QueuePage {
    nav: Option<Nav>,
    csrf: String,
    header: HeaderView,
    /// Exact counts by state, in the words the table uses, and their sum.
    counts: Vec<(&'static str, i64)>,
    total: i64,
    pending: i64,
    todos: Vec<super::view::TodoView>,
    /// The link to the next, older page, if there is one; `paged` when this is not the first.
    older_href: Option<String>,
    paged: bool,
    cleared: Option<u64>,
    usage: Option<UsageView>,
}

#[derive(Deserialize)]
pub struct QueueQuery {
    cleared: Option<u64>,
    /// The keyset cursor: the created time and id of the last todo of the previous page.
    before: Option<DateTime<Utc>>,
    before_id: Option<String>,
}

/// `GET /queues/{scope}/{queue}`: the header, exact counts, a page of todos (newest first, by
/// keyset) and the owner's controls.
pub async fn queue(
    State(state): State<Board>,
    headers: HeaderMap,
    Path((scope, queue)): Path<(String, String)>,
    Query(query): Query<QueueQuery>,
) -> PageResult {
    let viewer = require(&state, &headers).await?;
    let identity = visible_identity(&state.store, &viewer, &scope, &queue).await?;
    let names = snapshot::names(&state.store, &viewer.scope).await?;
    let capacity = state.store.queue_capacity().await?;
    let admissions = state.store.queue_admissions(std::slice::from_ref(&identity)).await?;
    let counts = state.store.queue_state_counts(&identity).await?;
    let count_of = |state: TodoState| counts.iter().find(|(s, _)| *s == state).map_or(0, |(_, n)| *n);
    let (pending, claimed) = (count_of(TodoState::Pending), count_of(TodoState::Claimed));
    let cursor = match (query.before, query.before_id) {
        (Some(created_at), Some(id)) => Some(TodoCursor { created_at, id }),
        _ => None,
    };
    let mut todos = state.store.queue_todos_page(&identity, cursor.as_ref(), TODOS_PER_PAGE + 1).await?;
    let more = todos.len() as i64 > TODOS_PER_PAGE;
    todos.truncate(TODOS_PER_PAGE as usize);
    let header = snapshot::header_for(
        &identity,
        &names,
        &viewer.scope,
        admissions.first(),
        (pending, claimed),
        &capacity,
        viewer.zone(),
    );
    let older_href = todos.last().filter(|_| more).map(|last| older_link(&header.queue.href, last));
    let rows = todos.iter().map(|t| super::view::todo_view(t, admissions.first(), viewer.zone())).collect();
    let usage =
        if header.manages { usage(&state.store, &identity, admissions.first(), viewer.zone()).await? } else { None };
    let by_state: Vec<(&'static str, i64)> =
        [TodoState::Pending, TodoState::Claimed, TodoState::Failed, TodoState::Done, TodoState::Discarded]
            .into_iter()
            .map(|state| (state.as_str(), count_of(state)))
            .collect();
    Ok(QueuePage {
        nav: Some(viewer.nav()),
        csrf: viewer.session.csrf_token.clone(),
        total: by_state.iter().map(|(_, n)| n).sum(),
        counts: by_state,
        pending,
        header,
        todos: rows,
        older_href,
        paged: cursor.is_some(),
        cleared: query.cleared,
        usage,
    }
    .into_response())
}

/// The queue page's link to the todos older than `last`.
fn older_link(queue_href: &str, last: &models::todo::Todo) -> String {
    let mut url = reqwest::Url::parse("http://board/").expect("a constant URL");
    url.query_pairs_mut()
        // Every digit the clock has: a cursor rounded to the millisecond would skip todos.
        .append_pair("before", &last.created_at.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
        .append_pair("before_id", &last.id);
    format!("{queue_href}?{}", url.query().unwrap_or_default())
}

/// The usage section of a queue whose policy limits claims per window (managers only, as the
/// API's policy detail is): each window's last windows' usage (issue #52: one chart per window,
/// an additional window's from the charge ledger, as far back as it is kept) and the last 24
/// hours' claims.
async fn usage(
    store: &PgStore,
    identity: &QueueIdentity,
    admission: Option<&QueueAdmission>,
    viewer_zone: chrono_tz::Tz,
) -> Result<Option<UsageView>> {
    let Some(policy) = admission.and_then(|a| a.policy.as_ref()) else { return Ok(None) };
    let (Some(limit), Some(window)) = (policy.max_claims_per_window, policy.window.as_ref()) else { return Ok(None) };
    let detail = store.policy_detail(identity).await?;
    let now = store.now();
    let ledger_kept_from = now - TimeDelta::days(CHARGE_LEDGER_RETENTION_DAYS);
    let more: Vec<(&WindowLimit, Vec<Span>)> = policy
        .additional_windows
        .iter()
        .map(|more| (more, recent_spans(&more.window, now, ledger_kept_from)))
        .collect();
    let oldest = detail
        .windows
        .iter()
        .map(|(start, _)| *start)
        .chain(more.iter().flat_map(|(_, spans)| spans.iter().map(|(start, _)| *start)))
        .min()
        .unwrap_or(now)
        .min(now - TimeDelta::hours(24));
    let history = store.claim_history(identity, oldest.max(now - TimeDelta::days(USAGE_RETENTION_DAYS))).await?;
    let end_of = |start| window.window_containing(start).1;
    let mut charts =
        vec![windows_chart(window.in_words(), 0, limit, window.tz, viewer_zone, &detail.windows, end_of, &history)];
    for (key, (more, spans)) in more.iter().enumerate() {
        let used = store.charged_in(identity, spans).await?;
        let windows: Vec<(DateTime<Utc>, i64)> = spans.iter().map(|(start, _)| *start).zip(used).collect();
        let end_of = |start| more.window.window_containing(start).1;
        let (name, zone) = (more.window.in_words(), more.window.tz);
        charts.push(windows_chart(name, key + 1, more.max_claims, zone, viewer_zone, &windows, end_of, &history));
    }
    Ok(Some(super::usage::usage_view(charts, viewer_zone, &history, now)))
}

/// A window's `[start, end)`.
type Span = (DateTime<Utc>, DateTime<Utc>);

/// The spans of `window`'s last windows up to `now`, newest first: at most as many as a policy
/// detail lists, none starting before `kept_from`.
fn recent_spans(window: &WindowSpec, now: DateTime<Utc>, kept_from: DateTime<Utc>) -> Vec<Span> {
    let mut spans = Vec::new();
    let mut at = now;
    while spans.len() < DETAIL_WINDOWS_MAX as usize {
        let (start, end) = window.window_containing(at);
        if start < kept_from {
            break;
        }
        spans.push((start, end));
        at = start - TimeDelta::milliseconds(1);
    }
    spans
}

#[derive(Template, WebTemplate)]
#[template(path = "todo.html")]
struct TodoPage {
    nav: Option<Nav>,
    csrf: String,
    todo: super::view::TodoView,
    queue: QueueRef,
    owner: Option<String>,
    dedup_key: Option<String>,
    payload: String,
    result: Option<String>,
    created: LocalTime,
    next_retry: Option<LocalTime>,
    actions: Vec<(&'static str, &'static str)>,
    manages: bool,
}

/// The owner actions a todo in this state offers, as (path segment, button label).
fn actions_for(state: TodoState) -> Vec<(&'static str, &'static str)> {
    match state {
        TodoState::Pending => vec![("claim", "Claim (5-minute lease)")],
        TodoState::Claimed => vec![("complete", "Complete"), ("fail", "Fail"), ("release", "Release")],
        TodoState::Failed => vec![("retry", "Retry now")],
        TodoState::Done | TodoState::Discarded => vec![],
    }
}

/// `GET /todos/{id}`: state, attempts, lease expiry, dedup key, the payload (escaped) and the
/// owner's actions.
pub async fn todo(State(state): State<Board>, headers: HeaderMap, Path(id): Path<String>) -> PageResult {
    let viewer = require(&state, &headers).await?;
    let nav = viewer.nav();
    let csrf = viewer.session.csrf_token.clone();
    let manages_any = viewer.scope.manages.clone();
    let todo = state.store.get_todo(&Actor::Human(viewer.scope.clone()), &id).await?;
    let admissions = state.store.queue_admissions(std::slice::from_ref(&todo.identity)).await?;
    let names = snapshot::names(&state.store, &viewer.scope).await?;
    let pretty = |value: &serde_json::Value| serde_json::to_string_pretty(value).unwrap_or_default();
    let mut view = super::view::todo_view(&todo, admissions.first(), viewer.zone());
    if todo.state != TodoState::Pending {
        view.chip = None;
    }
    Ok(TodoPage {
        nav: Some(nav),
        csrf,
        queue: QueueRef::new(&todo.identity, &names),
        owner: todo.owner.clone(),
        dedup_key: todo.idempotency_key.clone(),
        payload: todo.payload.as_ref().map_or_else(|| "(none)".to_string(), pretty),
        result: todo.result.as_ref().map(pretty),
        created: LocalTime::new(todo.created_at, viewer.zone()),
        next_retry: todo.next_retry_at.map(|at| LocalTime::new(at, viewer.zone())),
        actions: actions_for(todo.state),
        manages: manages_any.contains(&todo.identity),
        todo: view,
    }
    .into_response())
}

#[derive(Template, WebTemplate)]
#[template(path = "audit.html")]
struct AuditPage {
    nav: Option<Nav>,
    queue: QueueRef,
    records: Vec<AuditRow>,
}

struct AuditRow {
    at: LocalTime,
    at_zone: String,
    actor: String,
    action: String,
    before: String,
    after: String,
}

/// `GET /queues/{scope}/{queue}/audit`: who changed the policy, when, from what to what.
pub async fn audit(
    State(state): State<Board>,
    headers: HeaderMap,
    Path((scope, queue)): Path<(String, String)>,
) -> PageResult {
    let viewer = require(&state, &headers).await?;
    let identity = managed_identity(&state.store, &viewer.scope, &scope, &queue).await?;
    let records = state.store.policy_audit(&identity, 500).await?;
    if records.is_empty() {
        // As on the API: a queue that never had a policy is as unknown as a foreign one.
        return Err(PageError::from(Error::not_found()));
    }
    let admissions = state.store.queue_admissions(std::slice::from_ref(&identity)).await?;
    let zone = policy_zone(admissions.first());
    let names = snapshot::names(&state.store, &viewer.scope).await?;
    let show = |value: &Option<serde_json::Value>| value.as_ref().map_or_else(|| "none".into(), |v| v.to_string());
    let records = records
        .iter()
        .map(|r| AuditRow {
            at: LocalTime::new(r.at, viewer.zone()),
            at_zone: zone_moment(r.at, zone),
            actor: match (&r.actor_human_id, &r.actor_endpoint_id) {
                (_, Some(endpoint)) => format!("endpoint {endpoint}"),
                (Some(human), None) => format!("human {human}"),
                (None, None) => "system".into(),
            },
            action: r.action.clone(),
            before: show(&r.before),
            after: show(&r.after),
        })
        .collect();
    Ok(AuditPage { nav: Some(viewer.nav()), queue: QueueRef::new(&identity, &names), records }.into_response())
}
