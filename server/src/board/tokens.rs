//! The owner's operator token page (issue #29): the `sbh_` tokens a human holds for the
//! operator API and the CLI, with a button to revoke each, and a form to mint another, shown
//! once, so an owner can hand a script a token (or stop one) without curl.
//!
//! The rules are the operator API's own ([`crate::api::mint_operator_token`], the store's
//! `revoke_token`): the board only turns its expiry in days into the API's seconds, and a refusal
//! shows the page again with the error next to the field it names, values kept. A token that is
//! not the viewer's is the same 404 as one that does not exist.

use super::signin::{CsrfForm, Viewer, require, require_form};
use super::view::LocalTime;
use super::webhooks::{SecretPage, ShownValue};
use super::{Board, Nav, PageError, PageResult};
use crate::api::{MAX_TOKEN_LIFETIME_SECONDS, mint_operator_token};
use askama::Template;
use askama_web::WebTemplate;
use axum::Form;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use models::error::{Code, Error};
use models::store::prelude::*;
use serde::Deserialize;

const SECONDS_PER_DAY: i64 = 86_400;

/// The longest expiry the form accepts, in whole days: the API's limit, read in days.
const MAX_TOKEN_LIFETIME_DAYS: i64 = MAX_TOKEN_LIFETIME_SECONDS / SECONDS_PER_DAY;

struct Row {
    label: String,
    created: LocalTime,
    expires: Option<LocalTime>,
    expired: bool,
    revoke_href: String,
}

/// The mint form's fields as typed, kept across a refusal.
#[derive(Deserialize, Default)]
pub struct MintForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    label: String,
    /// Whole days until the token stops working; empty for a token that never expires.
    #[serde(default)]
    expires_in_days: String,
}

/// A refusal, next to the field it names (or above the form when it names none).
#[derive(Default)]
struct FieldError {
    label: Option<String>,
    expires_in_days: Option<String>,
    general: Option<String>,
}

#[derive(Template, WebTemplate)]
#[template(path = "tokens.html")]
struct ListPage {
    nav: Option<Nav>,
    csrf: String,
    rows: Vec<Row>,
    label: String,
    expires_in_days: String,
    error: FieldError,
    max_days: i64,
}

/// `GET /tokens`: the viewer's tokens and the mint form.
pub async fn list(State(state): State<Board>, headers: HeaderMap) -> PageResult {
    let viewer = require(&state, &headers).await?;
    page(&state, &viewer, MintForm::default(), FieldError::default(), StatusCode::OK).await
}

async fn page(state: &Board, viewer: &Viewer, form: MintForm, error: FieldError, status: StatusCode) -> PageResult {
    let tokens = state.store.list_tokens(&viewer.scope.human.id).await?;
    let now = chrono::Utc::now();
    let rows = tokens
        .into_iter()
        .map(|token| Row {
            label: token.label.unwrap_or_default(),
            created: LocalTime::new(token.created_at, viewer.zone()),
            expires: token.expires_at.map(|at| LocalTime::new(at, viewer.zone())),
            expired: token.expires_at.is_some_and(|at| at <= now),
            revoke_href: format!("/tokens/{}/revoke", token.id),
        })
        .collect();
    let page = ListPage {
        nav: Some(viewer.nav()),
        csrf: viewer.session.csrf_token.clone(),
        rows,
        label: form.label,
        expires_in_days: form.expires_in_days,
        error,
        max_days: MAX_TOKEN_LIFETIME_DAYS,
    };
    Ok((status, page).into_response())
}

/// `POST /tokens/new`: mints a token and shows it once; a refusal shows the page again with
/// the error next to its field.
pub async fn mint(State(state): State<Board>, headers: HeaderMap, Form(form): Form<MintForm>) -> PageResult {
    let viewer = require_form(&state, &headers, &form.csrf).await?;
    let label = Some(form.label.trim()).filter(|label| !label.is_empty());
    let minted = match expires_in_seconds(&form.expires_in_days) {
        Ok(expires_in_seconds) => {
            mint_operator_token(&state.store, &viewer.scope.human.id, label, expires_in_seconds).await
        }
        Err(error) => Err(error),
    };
    let token = match minted {
        Ok(token) => token,
        Err(error) if error.code == Code::InvalidArgument => {
            let field = field_error(&error);
            return page(&state, &viewer, form, field, StatusCode::BAD_REQUEST).await;
        }
        Err(error) => return Err(PageError::from(error)),
    };
    tracing::info!(human = %viewer.scope.human.id, "operator token minted from the board");
    Ok(once(&viewer, token))
}

fn once(viewer: &Viewer, token: String) -> Response {
    SecretPage {
        nav: Some(viewer.nav()),
        heading: "Your new operator token".to_string(),
        back_href: "/tokens",
        back_text: "Tokens",
        notice: "Copy the token now: it is shown only this once. If it is lost, revoke it and mint another.",
        values: vec![ShownValue { id: "token", label: "Token", copy: "Copy the token", value: token, focus: true }],
        rotated: false,
        previous_until: None,
        usage: "Send it to the operator API as Authorization: Bearer TOKEN, give it to the switchboard \
            CLI, or paste it on the sign-in page. It acts as you.",
    }
    .once(StatusCode::CREATED)
}

/// The form's expiry in days as the API's `expires_in_seconds`: None when left empty. What is
/// not a whole number is refused here, naming the field; the range is the API's to check (a
/// count of days too large to convert stays out of it).
fn expires_in_seconds(expires_in_days: &str) -> Result<Option<i64>, Error> {
    let raw = expires_in_days.trim();
    if raw.is_empty() {
        return Ok(None);
    }
    let days = raw.parse::<i64>().map_err(|_| {
        Error::invalid("expires_in_days", "expires_in_days must be a whole number of days, or empty for no expiry")
    })?;
    Ok(Some(days.saturating_mul(SECONDS_PER_DAY)))
}

/// Where a refusal shows. The API's `expires_in_seconds` is this form's `expires_in_days`, so
/// its range is said in days.
fn field_error(error: &Error) -> FieldError {
    let field = error.extras.get("field").and_then(|f| f.as_str()).unwrap_or("");
    let message = Some(error.message.clone());
    match field {
        "label" => FieldError { label: message, ..FieldError::default() },
        "expires_in_days" => FieldError { expires_in_days: message, ..FieldError::default() },
        "expires_in_seconds" => FieldError {
            expires_in_days: Some(format!("expires_in_days must be between 1 and {MAX_TOKEN_LIFETIME_DAYS}")),
            ..FieldError::default()
        },
        _ => FieldError { general: message, ..FieldError::default() },
    }
}

/// `POST /tokens/{id}/revoke`: the token is refused from now on; back to the list.
pub async fn revoke(
    State(state): State<Board>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(form): Form<CsrfForm>,
) -> PageResult {
    let viewer = require_form(&state, &headers, &form.csrf).await?;
    state.store.revoke_token(&viewer.scope.human.id, &id).await?;
    tracing::info!(token = %id, human = %viewer.scope.human.id, "operator token revoked from the board");
    Ok(Redirect::to("/tokens").into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_become_seconds_and_anything_else_names_the_field() {
        assert_eq!(expires_in_seconds(" ").ok(), Some(None));
        assert_eq!(expires_in_seconds("30").ok(), Some(Some(30 * 86_400)));
        assert_eq!(expires_in_seconds("0").ok(), Some(Some(0)), "the range is the API's to refuse");
        assert_eq!(expires_in_seconds("9223372036854775807").ok(), Some(Some(i64::MAX)));
        for bad in ["1.5", "a week", "7d"] {
            let error = expires_in_seconds(bad).expect_err(bad);
            assert_eq!(error.extras["field"], "expires_in_days", "{bad}");
        }
    }

    #[test]
    fn the_apis_range_is_said_in_days_beside_the_days_field() {
        let range = Error::invalid("expires_in_seconds", "expires_in_seconds must be between 1 and 31622400");
        let shown = field_error(&range);
        assert_eq!(shown.expires_in_days.as_deref(), Some("expires_in_days must be between 1 and 366"));
        let label = field_error(&Error::invalid("label", "label must be at most 100 characters"));
        assert_eq!(label.label.as_deref(), Some("label must be at most 100 characters"));
    }
}
