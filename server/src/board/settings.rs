//! The intake capacity settings page (intake-capacity.md "Board"): the configured and the
//! effective value, where the effective one comes from, the lock by
//! `SWITCHBOARD_QUEUE_MAX_PENDING`, and that lowering never removes waiting todos. Instance
//! admins change it with a no-JS form; everyone else reads it.
//!
//! The same `Store` calls as `GET | PATCH /api/v1/system/queue-capacity`: the store refuses a
//! locked or invalid value, and this page shows the refusal next to the field.

use super::signin::{require, require_form};
use super::{Board, Nav, PageError, PageResult};
use askama::Template;
use askama_web::WebTemplate;
use axum::Form;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect};
use models::capacity::{CAPACITY_ENV, Capacity};
use models::error::{Code, Error};
use models::store::prelude::*;
use serde::Deserialize;

#[derive(Template, WebTemplate)]
#[template(path = "settings_capacity.html")]
struct CapacityPage {
    nav: Option<Nav>,
    csrf: String,
    capacity: Capacity,
    env_name: &'static str,
    admin: bool,
    value: String,
    error: Option<String>,
}

impl CapacityPage {
    fn effective_text(&self) -> String {
        if self.capacity.effective <= 0 {
            "unlimited".into()
        } else {
            format!("{} pending todos per queue", self.capacity.effective)
        }
    }

    fn setting_text(&self) -> String {
        match self.capacity.setting {
            None => "not set".into(),
            Some(0) => "0 (unlimited)".into(),
            Some(value) => value.to_string(),
        }
    }
}

/// `GET /settings/capacity`.
pub async fn show(State(state): State<Board>, headers: HeaderMap) -> PageResult {
    let viewer = require(&state, &headers).await?;
    let capacity = state.store.queue_capacity().await?;
    Ok(CapacityPage {
        nav: Some(viewer.nav()),
        csrf: viewer.session.csrf_token.clone(),
        admin: viewer.scope.human.instance_admin,
        value: capacity.setting.unwrap_or(capacity.effective).to_string(),
        capacity,
        env_name: CAPACITY_ENV,
        error: None,
    }
    .into_response())
}

#[derive(Deserialize)]
pub struct CapacityForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    max_pending_per_queue: String,
}

/// `POST /settings/capacity`: instance admins only (403 page otherwise), as on the API.
pub async fn save(State(state): State<Board>, headers: HeaderMap, Form(form): Form<CapacityForm>) -> PageResult {
    let viewer = require_form(&state, &headers, &form.csrf).await?;
    if !viewer.scope.human.instance_admin {
        return Err(PageError::from(Error::new(
            Code::Forbidden,
            "only an instance admin may change the queue capacity",
        )));
    }
    let outcome = match form.max_pending_per_queue.trim().parse::<i64>() {
        Ok(value) => state.store.set_queue_capacity(value, &viewer.scope.human.id).await,
        Err(_) => Err(Error::invalid("max_pending_per_queue", "max_pending_per_queue must be a whole number")),
    };
    match outcome {
        Ok(_) => Ok(Redirect::to("/settings/capacity").into_response()),
        Err(error) if matches!(error.code, Code::InvalidArgument | Code::Conflict) => {
            let status = StatusCode::from_u16(error.code.http_status()).unwrap_or(StatusCode::BAD_REQUEST);
            let page = CapacityPage {
                nav: Some(viewer.nav()),
                csrf: viewer.session.csrf_token.clone(),
                admin: true,
                capacity: state.store.queue_capacity().await?,
                env_name: CAPACITY_ENV,
                value: form.max_pending_per_queue,
                error: Some(error.message),
            };
            Ok((status, page).into_response())
        }
        Err(error) => Err(PageError::from(error)),
    }
}
