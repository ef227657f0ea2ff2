//! The owner's web board (issue #12; SPEC-0030 REQ-11; base-system §6): server-rendered pages
//! over the same `Store` calls and `models` validation as the operator API, for a human signed
//! in with a browser session.
//!
//! What it owns: sign-in and sessions (`signin`, `sessions`), the pages (`pages`, `policy`,
//! `settings`, the endpoints and their credentials `endpoints`, their presence, shift and
//! notify hooks `endpoint_push`, the vend wizard `vend_wizard`, the webhooks and their signing
//! secrets `webhooks`, the operator tokens `tokens`), the owner's POST actions (`actions`), the
//! live header stream (`events`) and its own CSS and script (`assets`). What it must never do:
//! decide admission, capacity or tenancy itself. Every number shown and every refusal comes from
//! the store; anything the viewer may not see is the same 404 as something that does not exist.
//!
//! Pages work with JavaScript off (plain links and POST forms, 303 redirects to fixed paths);
//! the script only localises times and swaps in live header fragments. The board exists only
//! when the app runs on PostgreSQL (`serve`), where sessions are stored.

mod actions;
mod assets;
mod endpoint_push;
mod endpoints;
mod events;
mod pages;
mod policy;
pub mod sessions;
mod settings;
mod signin;
mod snapshot;
mod time_zone;
mod tokens;
mod usage;
mod vend_wizard;
mod view;
mod webhooks;

use crate::state::AppState;
use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::middleware;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use engine::PgStore;
use models::error::{Code, Error};

/// Largest form body the board accepts (base-system §6: 1 MiB forms).
const FORM_LIMIT_BYTES: usize = 1024 * 1024;

/// The board's state: the app's, on PostgreSQL.
pub type Board = AppState<PgStore>;

/// The board's routes, to merge into the app's router.
/// `shutdown` is the server's stop signal, which ends open live streams.
pub fn router(state: Board, shutdown: tokio::sync::watch::Receiver<bool>) -> Router {
    Router::new()
        .route("/", get(pages::board))
        .route("/board", get(pages::board))
        .route("/login", get(signin::login_page).post(signin::login_with_token))
        .route("/login/{token}", get(signin::link_page).post(signin::redeem_link))
        .route("/logout", post(signin::logout))
        .route("/assets/{file}", get(assets::serve))
        .route("/events", get(events::stream))
        .route("/todos/{id}", get(pages::todo))
        .route("/todos/{id}/{action}", post(actions::todo_action))
        .route("/queues/{scope}/{queue}", get(pages::queue))
        .route("/queues/{scope}/{queue}/todos/{id}/remove", post(actions::remove))
        .route("/queues/{scope}/{queue}/clear", get(actions::clear_confirm).post(actions::clear))
        .route("/queues/{scope}/{queue}/budget", get(policy::edit).post(policy::save))
        .route("/queues/{scope}/{queue}/budget/clear", get(policy::clear_confirm).post(policy::clear))
        .route("/queues/{scope}/{queue}/audit", get(pages::audit))
        .route("/endpoints", get(endpoints::list))
        .route("/endpoints/new", get(vend_wizard::start).post(vend_wizard::advance))
        .route("/endpoints/{reference}", get(endpoints::show))
        .route("/endpoints/{reference}/revoke", post(endpoints::revoke))
        .route("/endpoints/{reference}/rotate", post(endpoints::rotate))
        .route("/endpoints/{reference}/delete", get(endpoints::delete_confirm).post(endpoints::delete))
        .route("/webhooks", get(webhooks::list))
        .route("/webhooks/new", get(webhooks::new_form).post(webhooks::create))
        .route("/webhooks/{id}/rotate", post(webhooks::rotate))
        .route("/webhooks/{id}/delete", get(webhooks::delete_confirm).post(webhooks::delete))
        .route("/tokens", get(tokens::list))
        .route("/tokens/new", post(tokens::mint))
        .route("/tokens/{id}/revoke", post(tokens::revoke))
        .route("/endpoints/{reference}/presence", post(endpoint_push::set_presence))
        .route("/endpoints/{reference}/presence/clear", post(endpoint_push::clear_presence))
        .route("/endpoints/{reference}/shift", post(endpoint_push::set_shift))
        .route("/endpoints/{reference}/hooks", post(endpoint_push::add_hook))
        .route("/endpoints/{reference}/hooks/{hook_id}/test", post(endpoint_push::test_hook))
        .route("/endpoints/{reference}/hooks/{hook_id}/remove", post(endpoint_push::remove_hook))
        .route("/settings/capacity", get(settings::show).post(settings::save))
        .route("/settings/time-zone", get(time_zone::show).post(time_zone::save))
        .layer(axum::Extension(events::Shutdown(shutdown)))
        .layer(DefaultBodyLimit::max(FORM_LIMIT_BYTES))
        .layer(middleware::map_response(crate::response_headers::security_headers))
        .with_state(state)
}

/// What the page frame needs: who is signed in, and the token the sign-out form carries.
#[derive(Clone)]
pub struct Nav {
    pub human_name: String,
    pub csrf: String,
    pub admin: bool,
    /// Whether the human has a time zone set; the script sends the browser's while not.
    pub zone_known: bool,
}

/// A page that could not be shown: a redirect to sign in, or an error page with the status the
/// API would answer (404 for anything foreign or absent, byte for byte the same page).
pub enum PageError {
    SignIn,
    Failed { status: StatusCode, message: String },
}

impl PageError {
    pub fn sign_in() -> PageError {
        PageError::SignIn
    }

    pub fn csrf() -> PageError {
        PageError::Failed {
            status: StatusCode::FORBIDDEN,
            message: "This form has expired or did not come from this board. Reload the page and try again.".into(),
        }
    }
}

impl From<Error> for PageError {
    fn from(error: Error) -> Self {
        let status = StatusCode::from_u16(error.code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let message = match error.code {
            Code::NotFound => "Not found.".to_string(),
            Code::Internal => "Something went wrong on the server.".to_string(),
            _ => error.message,
        };
        PageError::Failed { status, message }
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "error.html")]
struct ErrorPage {
    nav: Option<Nav>,
    message: String,
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        match self {
            PageError::SignIn => Redirect::to("/login").into_response(),
            PageError::Failed { status, message } => (status, ErrorPage { nav: None, message }).into_response(),
        }
    }
}

pub type PageResult = Result<Response, PageError>;
