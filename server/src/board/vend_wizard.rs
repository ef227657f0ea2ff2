//! The vend wizard and its consent screen (SPEC-0030 REQ-10, issue #29): an owner vends an
//! endpoint from the board in three full pages and sees its MCP URL and bearer once.
//!
//! 1. Details: name, owning team (for team admins) and queues.
//! 2. Grant: one checkbox per verb with its one-line meaning. The default grant is checked; the
//!    opt-in verbs (`set_admission_policy`, `clear_admission_policy`, the discard verbs) are
//!    unchecked and each says in words that it lets the agent change its own budget or discard
//!    work.
//! 3. Consent: exactly what the agent will be able to do, then "Create endpoint".
//!
//! The wizard keeps no state on the server: each step's form carries the earlier answers as
//! hidden fields, and every step checks them again with the same [`crate::vend::check`] the
//! operator API uses, so a value one refuses the other refuses too, naming the same field. A
//! refusal shows the step that owns the field, with the error next to it. Works with
//! JavaScript off; the script only adds copy buttons to the last page.

use super::endpoints::{TokenPage, endpoint_href};
use super::signin::{Viewer, require, require_form};
use super::{Board, Nav, PageError, PageResult};
use crate::vend::{self, VendRequest};
use askama::Template;
use askama_web::WebTemplate;
use axum::Form;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use models::error::{Code, Error};
use models::store::prelude::*;
use models::verbs;

/// What the owner answered so far, as the forms carry it.
#[derive(Default, Clone)]
struct Answers {
    name: String,
    /// Team id, or empty for an endpoint of the owner's own.
    team: String,
    /// One queue reference per entry: `queue`, or `team:<ref>/<queue>`.
    queues: Vec<String>,
    verbs: Vec<String>,
    /// True once the owner has seen the grant step, so `verbs` is theirs and not the default.
    grant_chosen: bool,
}

impl Answers {
    /// Reads the form's pairs; `queues` is the details step's text (one per line or comma),
    /// `queue` the later steps' hidden copies, one each.
    fn from_pairs(pairs: &[(String, String)]) -> (Answers, Step, String, String) {
        let mut answers = Answers::default();
        let (mut step, mut action, mut csrf) = (Step::Details, String::new(), String::new());
        for (key, value) in pairs {
            match key.as_str() {
                "csrf" => csrf = value.clone(),
                "step" => step = Step::parse(value),
                "action" => action = value.clone(),
                "name" => answers.name = value.clone(),
                "team" => answers.team = value.trim().to_string(),
                "queues" => answers
                    .queues
                    .extend(value.split(['\n', ',']).map(str::trim).filter(|q| !q.is_empty()).map(str::to_string)),
                "queue" => answers.queues.push(value.clone()),
                "verb" => answers.verbs.push(value.clone()),
                "grant_chosen" => answers.grant_chosen = value == "1",
                _ => {}
            }
        }
        (answers, step, action, csrf)
    }

    fn request<'a>(&'a self, verbs: Option<Vec<&'a str>>) -> VendRequest<'a> {
        VendRequest {
            name: &self.name,
            queues: self.queues.iter().map(String::as_str).collect(),
            verbs,
            team: (!self.team.is_empty()).then_some(self.team.as_str()),
        }
    }

    /// The verbs the grant step shows checked: the owner's, or the default grant.
    fn checked_verbs(&self) -> Vec<String> {
        if self.grant_chosen {
            self.verbs.clone()
        } else {
            verbs::DEFAULT_GRANT.iter().map(|v| v.to_string()).collect()
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Step {
    Details,
    Grant,
    Consent,
}

impl Step {
    fn parse(raw: &str) -> Step {
        match raw {
            "grant" => Step::Grant,
            "consent" => Step::Consent,
            _ => Step::Details,
        }
    }
}

/// A team the owner may vend for (one they configure).
struct TeamChoice {
    id: String,
    name: String,
}

/// One verb on the grant step or the consent screen.
struct VerbChoice {
    verb: &'static str,
    meaning: &'static str,
    warning: Option<&'static str>,
    checked: bool,
}

#[derive(Template, WebTemplate)]
#[template(path = "vend_details.html")]
struct DetailsPage {
    nav: Option<Nav>,
    csrf: String,
    answers: Answers,
    teams: Vec<TeamChoice>,
    queues_text: String,
    error: FieldError,
}

#[derive(Template, WebTemplate)]
#[template(path = "vend_grant.html")]
struct GrantPage {
    nav: Option<Nav>,
    csrf: String,
    answers: Answers,
    choices: Vec<VerbChoice>,
    error: FieldError,
}

#[derive(Template, WebTemplate)]
#[template(path = "vend_consent.html")]
struct ConsentPage {
    nav: Option<Nav>,
    csrf: String,
    answers: Answers,
    owner: String,
    granted: Vec<VerbChoice>,
    withheld: Vec<VerbChoice>,
}

/// A refusal and the field it names, placed next to that field on the step that owns it.
#[derive(Default)]
struct FieldError {
    name: Option<String>,
    team: Option<String>,
    queues: Option<String>,
    verbs: Option<String>,
}

impl FieldError {
    fn of(error: &Error) -> FieldError {
        let field = error.extras.get("field").and_then(|f| f.as_str()).unwrap_or("");
        let message = Some(error.message.clone());
        match field {
            "name" => FieldError { name: message, ..FieldError::default() },
            "team" => FieldError { team: message, ..FieldError::default() },
            f if f.starts_with("verbs") => FieldError { verbs: message, ..FieldError::default() },
            // `queues`, `queues[i]`, and anything unnamed, which the details step shows above
            // its queue list (the only free-form input left).
            _ => FieldError { queues: message, ..FieldError::default() },
        }
    }

    fn belongs_to_grant(&self) -> bool {
        self.verbs.is_some()
    }
}

/// `GET /endpoints/new`: the details step, empty.
pub async fn start(State(state): State<Board>, headers: HeaderMap) -> PageResult {
    let viewer = require(&state, &headers).await?;
    details(&state, &viewer, Answers::default(), FieldError::default(), StatusCode::OK).await
}

/// `POST /endpoints/new`: the step named by `step`, moved on by `action` (`next`, `back`,
/// `create`). Every step re-checks what the earlier ones carried.
pub async fn advance(
    State(state): State<Board>,
    headers: HeaderMap,
    Form(pairs): Form<Vec<(String, String)>>,
) -> PageResult {
    let (answers, step, action, csrf) = Answers::from_pairs(&pairs);
    let viewer = require_form(&state, &headers, &csrf).await?;
    let going_back = action == "back";
    match (step, going_back) {
        (Step::Details, _) => {
            if let Err(error) = vend::check(&state.store, &viewer.scope, &answers.request(None)).await {
                return refused(&state, &viewer, answers, error).await;
            }
            Ok(grant(&viewer, answers, FieldError::default(), StatusCode::OK))
        }
        (Step::Grant, true) => details(&state, &viewer, answers, FieldError::default(), StatusCode::OK).await,
        (Step::Grant, false) => {
            let answers = Answers { grant_chosen: true, ..answers };
            match checked_grant(&state, &viewer, &answers).await {
                Ok(()) => consent(&state, &viewer, answers).await,
                Err(error) => refused(&state, &viewer, answers, error).await,
            }
        }
        (Step::Consent, true) => Ok(grant(&viewer, answers, FieldError::default(), StatusCode::OK)),
        (Step::Consent, false) => {
            if let Err(error) = checked_grant(&state, &viewer, &answers).await {
                return refused(&state, &viewer, answers, error).await;
            }
            let verbs = answers.verbs.iter().map(String::as_str).collect();
            let (endpoint, token) = match vend::vend(&state.store, &viewer.scope, &answers.request(Some(verbs))).await {
                Ok(vended) => vended,
                Err(error) => return refused(&state, &viewer, answers, error).await,
            };
            Ok(TokenPage {
                nav: Some(viewer.nav()),
                heading: format!("{} is ready", endpoint.name),
                mcp_url: state.public_url.absolute(&headers, &format!("/mcp/{}", endpoint.slug)),
                endpoint_href: endpoint_href(&endpoint.id),
                name: endpoint.name,
                token,
            }
            .once(StatusCode::CREATED))
        }
    }
}

/// The whole request, verbs included, as the store would vend it. The wizard asks for at least
/// one verb: a grant of none makes an endpoint that can do nothing.
async fn checked_grant(state: &Board, viewer: &Viewer, answers: &Answers) -> Result<(), Error> {
    if answers.verbs.is_empty() {
        return Err(Error::invalid("verbs", "choose at least one verb for the agent"));
    }
    let verbs = answers.verbs.iter().map(String::as_str).collect();
    vend::check(&state.store, &viewer.scope, &answers.request(Some(verbs))).await.map(|_| ())
}

/// A refused step: a field error on the step that owns the field; anything else (a foreign
/// team is `not_found`) is the error page, as the API would answer.
async fn refused(state: &Board, viewer: &Viewer, answers: Answers, error: Error) -> PageResult {
    if error.code != Code::InvalidArgument {
        return Err(PageError::from(error));
    }
    let field = FieldError::of(&error);
    if field.belongs_to_grant() {
        Ok(grant(viewer, answers, field, StatusCode::BAD_REQUEST))
    } else {
        details(state, viewer, answers, field, StatusCode::BAD_REQUEST).await
    }
}

async fn details(
    state: &Board,
    viewer: &Viewer,
    answers: Answers,
    error: FieldError,
    status: StatusCode,
) -> PageResult {
    let teams = configured_teams(state, viewer).await?;
    let page = DetailsPage {
        nav: Some(viewer.nav()),
        csrf: viewer.session.csrf_token.clone(),
        queues_text: answers.queues.join("\n"),
        answers,
        teams,
        error,
    };
    Ok((status, page).into_response())
}

fn grant(viewer: &Viewer, answers: Answers, error: FieldError, status: StatusCode) -> axum::response::Response {
    let checked = answers.checked_verbs();
    let choices = verb_choices(|verb| checked.iter().any(|c| c == verb));
    let page = GrantPage { nav: Some(viewer.nav()), csrf: viewer.session.csrf_token.clone(), answers, choices, error };
    (status, page).into_response()
}

async fn consent(state: &Board, viewer: &Viewer, answers: Answers) -> PageResult {
    let owner = if answers.team.is_empty() {
        format!("you ({})", viewer.scope.human.name)
    } else {
        let teams = configured_teams(state, viewer).await?;
        let team = teams.iter().find(|t| t.id == answers.team).map_or(answers.team.as_str(), |t| t.name.as_str());
        format!("the team {team}")
    };
    let (granted, withheld) =
        verb_choices(|verb| answers.verbs.iter().any(|v| v == verb)).into_iter().partition(|choice| choice.checked);
    let page = ConsentPage {
        nav: Some(viewer.nav()),
        csrf: viewer.session.csrf_token.clone(),
        answers,
        owner,
        granted,
        withheld,
    };
    Ok(page.into_response())
}

/// Every verb in the catalog's order, with its meaning and warning; `checked` says which.
fn verb_choices(checked: impl Fn(&str) -> bool) -> Vec<VerbChoice> {
    verbs::ALL_VERBS
        .iter()
        .map(|&verb| VerbChoice {
            verb,
            meaning: verbs::meaning(verb),
            warning: verbs::warning(verb),
            checked: checked(verb),
        })
        .collect()
}

/// The teams the viewer configures (owner or admin role), which may own a vended endpoint.
async fn configured_teams(state: &Board, viewer: &Viewer) -> Result<Vec<TeamChoice>, PageError> {
    let teams = state.store.list_teams(&viewer.scope).await?;
    Ok(teams
        .into_iter()
        .filter(|(_, role)| role.configures())
        .map(|(team, _)| TeamChoice { id: team.id, name: team.name })
        .collect())
}
