//! The viewer's time zone (SPEC-0030 REQ-11: times "in the viewer's local time", issue #51):
//! the IANA zone every page writes times in server-side, so a board without JavaScript shows
//! the human's own time rather than UTC. Set here by hand, or by the board's script from the
//! browser's zone the first time it runs with none set; UTC only while none is known.
//!
//! The page is a no-JS form like every other; the script's request is the same POST, marked
//! `auto`, answered 204 instead of a page.

use super::sessions;
use super::signin::{require, require_form};
use super::{Board, Nav, PageError, PageResult};
use askama::Template;
use askama_web::WebTemplate;
use axum::Form;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect};
use chrono_tz::Tz;
use serde::Deserialize;

#[derive(Template, WebTemplate)]
#[template(path = "settings_time_zone.html")]
struct TimeZonePage {
    nav: Option<Nav>,
    csrf: String,
    /// The zone set, if any.
    current: Option<String>,
    /// The now in the zone the pages use, as an example.
    now_text: String,
    value: String,
    error: Option<String>,
}

/// `GET /settings/time-zone`.
pub async fn show(State(state): State<Board>, headers: HeaderMap) -> PageResult {
    let viewer = require(&state, &headers).await?;
    let current = viewer.session.time_zone.clone();
    Ok(page(&state, &viewer, current.clone().unwrap_or_default(), None, current).into_response())
}

fn page(
    state: &Board,
    viewer: &super::signin::Viewer,
    value: String,
    error: Option<String>,
    current: Option<String>,
) -> TimeZonePage {
    let zone = current.as_deref().and_then(|name| name.parse::<Tz>().ok()).unwrap_or(Tz::UTC);
    TimeZonePage {
        nav: Some(viewer.nav()),
        csrf: viewer.session.csrf_token.clone(),
        current,
        now_text: super::view::zone_moment(state.store.now(), zone),
        value,
        error,
    }
}

#[derive(Deserialize)]
pub struct TimeZoneForm {
    csrf: String,
    /// An IANA zone name; empty forgets the zone.
    #[serde(default)]
    zone: String,
    /// Sent by the script with the browser's zone: answered 204, and never replaces a zone the
    /// human set by hand.
    #[serde(default)]
    auto: Option<String>,
}

/// `POST /settings/time-zone`: checks the name against the zones the server knows, saves it (or
/// forgets it), and shows the page again; an unknown name changes nothing and says so.
pub async fn save(State(state): State<Board>, headers: HeaderMap, Form(form): Form<TimeZoneForm>) -> PageResult {
    let viewer = require_form(&state, &headers, &form.csrf).await?;
    let name = form.zone.trim();
    let automatic = form.auto.is_some();
    if automatic && viewer.session.time_zone.is_some() {
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    let zone = match name {
        "" => None,
        name => match name.parse::<Tz>() {
            Ok(zone) => Some(zone),
            Err(_) if automatic => return Ok(StatusCode::NO_CONTENT.into_response()),
            Err(_) => {
                let error = format!("zone: {name} is not an IANA time zone name (such as Europe/Berlin)");
                let current = viewer.session.time_zone.clone();
                let page = page(&state, &viewer, name.to_string(), Some(error), current);
                return Ok((StatusCode::BAD_REQUEST, page).into_response());
            }
        },
    };
    sessions::set_time_zone(state.store.pool(), &viewer.scope.human.id, zone.map(|z| z.name()))
        .await
        .map_err(PageError::from)?;
    tracing::info!(human = %viewer.scope.human.id, zone = zone.map_or("none", |z| z.name()), automatic, "time zone set from the board");
    if automatic {
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    Ok(Redirect::to("/settings/time-zone").into_response())
}
