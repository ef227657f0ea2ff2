//! Who is looking at the board: the session cookie, the signed-in human's scope, the CSRF
//! synchronizer check, and the sign-in and sign-out pages.
//!
//! Sign-in is by a one-time link (`switchboard admin login-link NAME`, redeemed by a POST from
//! the link's page, so a link previewer that only GETs cannot spend it) or by pasting an `sbh_`
//! operator token. Redirects go only to fixed paths of this site.

use super::{Board, Nav, PageError, PageResult};
use crate::auth::HUMAN_TOKEN_PREFIX;
use askama::Template;
use askama_web::WebTemplate;
use axum::Form;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect};
use engine::pg_store::hash_token;
use models::error::Error;
use models::scope::HumanScope;
use models::store::prelude::*;
use serde::Deserialize;

use super::sessions::{self, SESSION_ABSOLUTE_DAYS, Session};

const COOKIE_NAME: &str = "sb_session";

/// The signed-in human behind a request, and their session.
pub struct Viewer {
    pub scope: HumanScope,
    pub session: Session,
}

impl Viewer {
    /// The zone the viewer's pages show times in: the one set for the human, UTC until then.
    pub fn zone(&self) -> chrono_tz::Tz {
        self.session.time_zone.as_deref().and_then(|name| name.parse().ok()).unwrap_or(chrono_tz::Tz::UTC)
    }

    pub fn nav(&self) -> Nav {
        Nav {
            human_name: self.scope.human.name.clone(),
            csrf: self.session.csrf_token.clone(),
            admin: self.scope.human.instance_admin,
            zone_known: self.session.time_zone.is_some(),
        }
    }

    /// Refuses a state-changing form whose synchronizer token is not this session's.
    pub fn check_csrf(&self, submitted: &str) -> Result<(), PageError> {
        let expected = self.session.csrf_token.as_bytes();
        let given = submitted.as_bytes();
        // Compare every byte, so the time taken does not say how much of a guess was right.
        let same =
            expected.len() == given.len() && expected.iter().zip(given).fold(0_u8, |acc, (a, b)| acc | (a ^ b)) == 0;
        if same { Ok(()) } else { Err(PageError::csrf()) }
    }
}

fn session_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE_NAME)
        .map(|(_, value)| value.to_string())
}

/// The viewer, or None when the request carries no live session. `touch` renews idle expiry.
pub async fn viewer(state: &Board, headers: &HeaderMap, touch: bool) -> Result<Option<Viewer>, Error> {
    let Some(cookie) = session_cookie(headers) else { return Ok(None) };
    let Some(session) = sessions::lookup(state.store.pool(), &cookie, touch).await? else { return Ok(None) };
    let Some(scope) = state.store.human_scope(&session.human_id).await? else { return Ok(None) };
    Ok(Some(Viewer { scope, session }))
}

/// A page that needs a viewer: the viewer, or a redirect to the sign-in page.
pub async fn require(state: &Board, headers: &HeaderMap) -> Result<Viewer, PageError> {
    viewer(state, headers, true).await?.ok_or_else(PageError::sign_in)
}

/// The viewer behind a state-changing form: signed in, and the form carries this session's
/// synchronizer token. Every board POST starts here, so none can forget the CSRF check.
pub async fn require_form(state: &Board, headers: &HeaderMap, csrf: &str) -> Result<Viewer, PageError> {
    let viewer = require(state, headers).await?;
    viewer.check_csrf(csrf)?;
    Ok(viewer)
}

/// True when the browser reached us over https (directly or through a proxy that says so), so
/// the cookie must be `Secure`.
fn over_https(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|proto| proto.trim().eq_ignore_ascii_case("https"))
}

fn cookie_header(value: &str, max_age_seconds: i64, secure: bool) -> Option<HeaderValue> {
    let secure = if secure { "; Secure" } else { "" };
    HeaderValue::from_str(&format!(
        "{COOKIE_NAME}={value}; Path=/; HttpOnly; SameSite=Lax; Max-Age={max_age_seconds}{secure}"
    ))
    .ok()
}

/// Opens a session and sends the browser to the board with its cookie.
async fn sign_in(state: &Board, headers: &HeaderMap, human_id: &str) -> PageResult {
    let id = sessions::open(state.store.pool(), human_id).await?;
    let mut response = Redirect::to("/").into_response();
    if let Some(cookie) = cookie_header(&id, SESSION_ABSOLUTE_DAYS * 86_400, over_https(headers)) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    Ok(response)
}

#[derive(Template, WebTemplate)]
#[template(path = "login.html")]
pub struct LoginPage {
    pub nav: Option<Nav>,
    pub error: Option<String>,
    /// Set on the page a login link opens: the form then spends that link.
    pub link_action: Option<String>,
}

/// `GET /login`: the token form (or straight to the board when already signed in).
pub async fn login_page(State(state): State<Board>, headers: HeaderMap) -> PageResult {
    if viewer(&state, &headers, false).await?.is_some() {
        return Ok(Redirect::to("/").into_response());
    }
    Ok(LoginPage { nav: None, error: None, link_action: None }.into_response())
}

#[derive(Deserialize)]
pub struct TokenForm {
    #[serde(default)]
    token: String,
}

/// `POST /login`: signs in with a pasted `sbh_` operator token.
pub async fn login_with_token(
    State(state): State<Board>,
    headers: HeaderMap,
    Form(form): Form<TokenForm>,
) -> PageResult {
    let token = form.token.trim();
    let human = if token.starts_with(HUMAN_TOKEN_PREFIX) && token.len() <= 200 {
        state.store.human_by_token(&hash_token(token)).await?
    } else {
        None
    };
    match human {
        Some(human) => sign_in(&state, &headers, &human.human.id).await,
        None => Ok((
            StatusCode::UNAUTHORIZED,
            LoginPage { nav: None, error: Some("That token is unknown or revoked.".into()), link_action: None },
        )
            .into_response()),
    }
}

/// `GET /login/{token}`: the link's page, with one button that spends it.
pub async fn link_page(Path(token): Path<String>) -> PageResult {
    if !token.starts_with(sessions::LINK_TOKEN_PREFIX) || !token.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Err(PageError::from(Error::not_found()));
    }
    Ok(LoginPage { nav: None, error: None, link_action: Some(format!("/login/{token}")) }.into_response())
}

/// `POST /login/{token}`: spends a login link (once, within 10 minutes) and signs in.
pub async fn redeem_link(State(state): State<Board>, headers: HeaderMap, Path(token): Path<String>) -> PageResult {
    match sessions::redeem_login_link(state.store.pool(), &token).await? {
        Some(human_id) => sign_in(&state, &headers, &human_id).await,
        None => Ok((
            StatusCode::UNAUTHORIZED,
            LoginPage {
                nav: None,
                error: Some("This sign-in link is expired or was already used. Ask for a new one.".into()),
                link_action: None,
            },
        )
            .into_response()),
    }
}

#[derive(Deserialize)]
pub struct CsrfForm {
    #[serde(default)]
    pub csrf: String,
}

/// `POST /logout`: deletes the session and the cookie.
pub async fn logout(State(state): State<Board>, headers: HeaderMap, Form(form): Form<CsrfForm>) -> PageResult {
    let viewer = require_form(&state, &headers, &form.csrf).await?;
    sessions::close(state.store.pool(), &viewer.session).await?;
    let mut response = Redirect::to("/login").into_response();
    if let Some(cookie) = cookie_header("", 0, over_https(&headers)) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    Ok(response)
}
