//! Vending an endpoint: one rule for the operator API (`POST /api/v1/endpoints`) and the
//! board's vend wizard, so a name, a queue list, a team or a grant that one refuses the other
//! refuses too, naming the same field.
//!
//! [`check`] validates a request against the store without writing anything (the wizard calls
//! it at every step); [`vend`] checks again and writes the endpoint, returning its bearer once.

use engine::pg_store::{hash_token, new_token};
use models::error::{Error, Result};
use models::identity::{GrantRef, Owner, ScopeRef};
use models::scope::{Endpoint, HumanScope};
use models::store::{NewEndpoint, Store};
use models::verbs;

/// Longest endpoint name accepted.
pub const ENDPOINT_NAME_LENGTH_MAX: usize = 100;
/// Most queues one endpoint may be granted.
pub const GRANTED_QUEUES_MAX: usize = 500;

/// What a vend asks for, as the caller wrote it.
pub struct VendRequest<'a> {
    pub name: &'a str,
    /// Own queues by name, team queues as `team:<ref>/<queue>`.
    pub queues: Vec<&'a str>,
    /// The verbs to grant; `None` grants the default grant.
    pub verbs: Option<Vec<&'a str>>,
    /// The team that owns the endpoint (id or slug); `None` for the caller.
    pub team: Option<&'a str>,
}

/// A request the store has accepted: the endpoint to write, less its token.
pub struct CheckedVend {
    pub name: String,
    pub owner_team_id: Option<String>,
    pub own_queues: Vec<String>,
    pub team_queues: Vec<(String, String)>,
    pub verbs: Vec<String>,
}

/// Validates `request` for `human`: name length, the queue list, the team (one the caller
/// configures; any other is `not_found`) and the verbs. Reads only.
pub async fn check<S: Store>(store: &S, human: &HumanScope, request: &VendRequest<'_>) -> Result<CheckedVend> {
    let name = request.name.trim();
    if name.is_empty() || name.chars().count() > ENDPOINT_NAME_LENGTH_MAX {
        return Err(Error::invalid("name", format!("name must be 1-{ENDPOINT_NAME_LENGTH_MAX} characters")));
    }
    if request.queues.is_empty() || request.queues.len() > GRANTED_QUEUES_MAX {
        return Err(Error::invalid("queues", format!("queues must list 1-{GRANTED_QUEUES_MAX} queues")));
    }
    let verbs = granted_verbs(request.verbs.as_deref())?;
    let owner_team_id = owner_team(store, human, request.team).await?;
    let (own_queues, team_queues) = granted_queues(store, human, &request.queues, owner_team_id.as_ref()).await?;
    Ok(CheckedVend { name: name.to_string(), owner_team_id, own_queues, team_queues, verbs })
}

/// Checks `request` and writes the endpoint; the endpoint and its `sbk_` bearer (shown once).
pub async fn vend<S: Store>(store: &S, human: &HumanScope, request: &VendRequest<'_>) -> Result<(Endpoint, String)> {
    let checked = check(store, human, request).await?;
    let token = new_token(crate::auth::ENDPOINT_TOKEN_PREFIX);
    let endpoint = store
        .vend_endpoint(NewEndpoint {
            name: checked.name,
            owner_human_id: checked.owner_team_id.is_none().then(|| human.human.id.clone()),
            owner_team_id: checked.owner_team_id,
            own_queues: checked.own_queues,
            team_queues: checked.team_queues,
            verbs: checked.verbs,
            token_hash: hash_token(&token),
            created_by_human_id: Some(human.human.id.clone()),
        })
        .await?;
    tracing::info!(endpoint = %endpoint.id, human = %human.human.id, "endpoint vended");
    Ok((endpoint, token))
}

/// The owner of a vended endpoint: the caller (None), or a team the caller configures
/// (owner/admin); any other team is the same 404 as one that does not exist.
async fn owner_team<S: Store>(store: &S, human: &HumanScope, team: Option<&str>) -> Result<Option<String>> {
    let Some(team) = team else { return Ok(None) };
    let Owner::Team(team_id) = store.resolve_scope(&human.reach, &ScopeRef::Team(team.into())).await? else {
        return Err(Error::internal("team scope resolved to an endpoint"));
    };
    if !human.teams.iter().any(|(id, role)| id == &team_id && role.configures()) {
        return Err(Error::not_found());
    }
    Ok(Some(team_id))
}

/// The queues a vend grants, split into the endpoint's own and team queues; a team endpoint
/// drains only its own team's queues.
async fn granted_queues<S: Store>(
    store: &S,
    human: &HumanScope,
    queues: &[&str],
    owner_team_id: Option<&String>,
) -> Result<(Vec<String>, Vec<(String, String)>)> {
    let mut own_queues = Vec::new();
    // (field, team reference, queue): the references are resolved together, in one store call.
    let mut team_grants = Vec::new();
    for (i, raw) in queues.iter().enumerate() {
        let field = format!("queues[{i}]");
        match GrantRef::parse(&field, raw)? {
            GrantRef::Own(queue) => own_queues.push(queue),
            GrantRef::Team { team, queue } => team_grants.push((field, team, queue)),
        }
    }
    let references: Vec<String> = team_grants.iter().map(|(_, team, _)| team.clone()).collect();
    let team_ids = store.resolve_teams(&human.reach, &references).await?;
    let mut team_queues = Vec::new();
    for ((field, _, queue), team_id) in team_grants.into_iter().zip(team_ids) {
        if owner_team_id.is_some_and(|owner| owner != &team_id) {
            return Err(Error::invalid(&field, "a team's endpoint drains only that team's queues"));
        }
        team_queues.push((team_id, queue));
    }
    Ok((own_queues, team_queues))
}

/// The verbs a vend grants: the default grant when none are named; opt-in verbs only when named.
fn granted_verbs(requested: Option<&[&str]>) -> Result<Vec<String>> {
    let Some(requested) = requested else {
        return Ok(verbs::DEFAULT_GRANT.iter().map(|v| v.to_string()).collect());
    };
    let mut granted: Vec<String> = Vec::new();
    for (i, verb) in requested.iter().enumerate() {
        if !verbs::is_known(verb) {
            return Err(Error::invalid(&format!("verbs[{i}]"), format!("unknown verb {verb}")));
        }
        if !granted.iter().any(|g| g == verb) {
            granted.push(verb.to_string());
        }
    }
    Ok(granted)
}
