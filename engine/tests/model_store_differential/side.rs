//! One store with its world (principals, queues, webhooks by index) and how each operation
//! runs on it; the REQ-9 corruption each store takes.

use crate::normaliser::Normaliser;
use crate::ops::{Creator, Op};
use engine::PgStore;
use engine::pg_store::hash_token;
use models::admission::Policy;
use models::identity::{QueueIdentity, ScopeRef};
use models::model_store::ModelStore;
use models::scope::{Actor, HumanScope, TeamRole};
use models::store::prelude::*;
use models::store::{AgentLookup, NewEndpoint, PolicyActor, TodoQuery, TodoSet};
use models::todo::{CreatedByKind, NewTodo, TodoState};
use serde_json::json;

/// What the corruption of a stored policy takes on each store (REQ-9 fault injection).
pub(crate) trait Corruptible: Store {
    async fn corrupt_zone(&self, identity: &QueueIdentity) -> bool;
}

impl Corruptible for PgStore {
    async fn corrupt_zone(&self, identity: &QueueIdentity) -> bool {
        sqlx::query(
            "UPDATE admission_policies SET window_tz = 'Mars/Olympus' \
             WHERE queue = $3 AND (endpoint_id = $1 OR team_id = $2)",
        )
        .bind(identity.endpoint_id())
        .bind(identity.team_id())
        .bind(&identity.queue)
        .execute(self.pool())
        .await
        .expect("corrupt")
        .rows_affected()
            > 0
    }
}

impl Corruptible for ModelStore {
    async fn corrupt_zone(&self, identity: &QueueIdentity) -> bool {
        self.corrupt_policy_zone(identity, "Mars/Olympus")
    }
}

/// One store with its world: the principals, queues and webhooks, by index.
pub(crate) struct Side<S> {
    pub(crate) store: S,
    pub(crate) humans: Vec<HumanScope>,
    /// Agent A, agent B, human alice, human bob.
    pub(crate) actors: Vec<Actor>,
    pub(crate) endpoints: Vec<String>,
    pub(crate) identities: Vec<QueueIdentity>,
    pub(crate) webhooks: Vec<String>,
    pub(crate) norm: Normaliser,
}

impl Side<ModelStore> {
    /// (actor index, todo index) of every claimed todo whose holder is one of the actors.
    pub(crate) async fn claimed_todos(&self) -> Vec<(usize, usize)> {
        let query =
            TodoQuery { set: TodoSet::Queues(self.identities.clone()), state: Some(TodoState::Claimed), limit: 1000 };
        let todos = self.store.list_todos(query).await.expect("list");
        todos
            .iter()
            .filter_map(|t| {
                let actor = self.actors.iter().position(|a| Some(a.label()) == t.owner)?;
                Some((actor, self.norm.index("td", &t.id)?))
            })
            .collect()
    }
}

pub(crate) async fn setup_pg(store: PgStore) -> (Side<PgStore>, Vec<String>) {
    let (_, alice_token) = store.bootstrap_human("alice", false).await.expect("alice");
    let (_, bob_token) = store.bootstrap_human("bob", false).await.expect("bob");
    let team = store.bootstrap_team("core", "alice").await.expect("team");
    store.bootstrap_member(&team.id, "bob", TeamRole::Member).await.expect("member");
    setup(store, [hash_token(&alice_token), hash_token(&bob_token)], team.id, team.slug).await
}

pub(crate) async fn setup_model(store: ModelStore) -> (Side<ModelStore>, Vec<String>) {
    let hashes = [hash_token("alice-operator-token"), hash_token("bob-operator-token")];
    store.add_human("alice", false, &hashes[0]).expect("alice");
    store.add_human("bob", false, &hashes[1]).expect("bob");
    let team = store.add_team("core", "alice").expect("team");
    store.add_member(&team.id, "bob", TeamRole::Member).expect("member");
    setup(store, hashes, team.id, team.slug).await
}

/// The world both stores share, built through the `Store` surface, with its transcript.
pub(crate) async fn setup<S: Corruptible>(
    store: S,
    human_hashes: [String; 2],
    team_id: String,
    team_slug: String,
) -> (Side<S>, Vec<String>) {
    let mut norm = Normaliser::default();
    norm.slugs.push((team_slug, "<team-slug>".into()));
    let mut log = Transcript { norm, lines: Vec::new() };
    let mut humans = Vec::new();
    for hash in &human_hashes {
        humans.push(store.human_by_token(hash).await.expect("lookup").expect("human"));
    }
    let (endpoints, mut actors) = vend_agents(&store, &humans, &team_id, &mut log).await;
    let humans = humans_after_vending(&store, &human_hashes, &mut log).await;
    operator_tokens(&store, &humans, &mut log).await;
    endpoint_credentials(&store, &endpoints, &mut log).await;
    log.push(&store.resolve_scope(&humans[0].reach, &ScopeRef::Team("core".into())).await);
    log.push(&store.resolve_scope(&humans[0].reach, &ScopeRef::Team(team_id.clone())).await);
    log.push(&store.resolve_scope(&humans[1].manages, &ScopeRef::Endpoint(endpoints[0].clone())).await);
    actors.push(Actor::Human(humans[0].clone()));
    actors.push(Actor::Human(humans[1].clone()));
    let identities = vec![
        QueueIdentity::endpoint(endpoints[0].clone(), "inbox"),
        QueueIdentity::endpoint(endpoints[0].clone(), "lane"),
        QueueIdentity::endpoint(endpoints[0].clone(), "slow"),
        QueueIdentity::team(team_id.clone(), "triage"),
        QueueIdentity::endpoint(endpoints[1].clone(), "inbox"),
        QueueIdentity::endpoint(endpoints[1].clone(), "lane"),
    ];
    let webhooks = webhooks(&store, &humans, &identities, &mut log).await;
    let Transcript { norm, lines: transcript } = log;
    let side = Side { store, humans, actors, endpoints, identities, webhooks, norm };
    (side, transcript)
}

/// The setup's transcript: every answer normalised, in the order the stores gave them.
struct Transcript {
    norm: Normaliser,
    lines: Vec<String>,
}

impl Transcript {
    fn push<T: std::fmt::Debug>(&mut self, value: &T) {
        let line = self.norm.of(value);
        self.lines.push(line);
    }
}

/// Each human vends one agent endpoint (with the team's `triage` queue) and it authenticates
/// under its own slug only. Returns the endpoint ids and the two agent actors.
async fn vend_agents<S: Corruptible>(
    store: &S,
    humans: &[HumanScope],
    team_id: &str,
    log: &mut Transcript,
) -> (Vec<String>, Vec<Actor>) {
    let mut endpoints = Vec::new();
    let mut actors = Vec::new();
    for (i, (name, own)) in
        [("alice agent", vec!["inbox", "lane", "slow"]), ("bob agent", vec!["inbox", "lane"])].into_iter().enumerate()
    {
        let token_hash = hash_token(&format!("agent-token-{i}"));
        let vended = store
            .vend_endpoint(NewEndpoint {
                name: name.into(),
                owner_human_id: Some(humans[i].human.id.clone()),
                owner_team_id: None,
                own_queues: own.iter().map(|q| q.to_string()).collect(),
                team_queues: vec![(team_id.to_string(), "triage".into())],
                verbs: models::verbs::DEFAULT_GRANT.iter().map(|v| v.to_string()).collect(),
                token_hash: token_hash.clone(),
                created_by_human_id: Some(humans[i].human.id.clone()),
            })
            .await
            .expect("vend");
        log.norm.slugs.push((vended.slug.clone(), format!("<endpoint-slug-{i}>")));
        log.push(&vended);
        log.push(&store.agent_by_token("someone-else", &token_hash).await);
        let AgentLookup::Found(scope) = store.agent_by_token(&vended.slug, &token_hash).await.expect("lookup") else {
            panic!("the vended endpoint does not authenticate");
        };
        log.push(&scope);
        endpoints.push(vended.id);
        actors.push(Actor::Agent(*scope));
    }
    (endpoints, actors)
}

/// The humans looked up again, now that they own endpoints, with what each can see.
async fn humans_after_vending<S: Corruptible>(
    store: &S,
    human_hashes: &[String; 2],
    log: &mut Transcript,
) -> Vec<HumanScope> {
    let mut humans = Vec::new();
    for hash in human_hashes {
        let human = store.human_by_token(hash).await.expect("lookup").expect("human");
        log.push(&human);
        log.push(&store.list_endpoints(&human).await);
        log.push(&store.list_teams(&human).await);
        humans.push(human);
    }
    humans
}

/// Credential management (issue #14): a human's own tokens only; an expiring token; revoking.
async fn operator_tokens<S: Corruptible>(store: &S, humans: &[HumanScope], log: &mut Transcript) {
    log.push(&store.mint_token(&humans[1].human.id, Some("second"), &hash_token("bob-second"), None).await);
    log.push(&store.mint_token(&humans[1].human.id, None, &hash_token("bob-second"), None).await);
    log.push(&store.mint_token(&humans[1].human.id, Some("brief"), &hash_token("bob-brief"), Some(600)).await);
    let tokens = store.list_tokens(&humans[1].human.id).await.expect("tokens");
    let shown = |tokens: &[models::store::ApiToken]| -> Vec<(String, Option<String>, bool)> {
        tokens.iter().map(|t| (t.id.clone(), t.label.clone(), t.expires_at.is_some())).collect()
    };
    log.push(&shown(&tokens));
    log.push(&store.revoke_token(&humans[0].human.id, &tokens[1].id).await);
    log.push(&store.revoke_token(&humans[1].human.id, &tokens[1].id).await);
    log.push(&store.revoke_token(&humans[1].human.id, &tokens[1].id).await);
    log.push(&store.human_by_token(&hash_token("bob-second")).await.map(|h| h.is_some()));
    log.push(&store.human_by_token(&hash_token("bob-brief")).await.map(|h| h.is_some()));
    log.push(&shown(&store.list_tokens(&humans[1].human.id).await.expect("tokens")));
}

/// An endpoint's credential: revoked, rotated to a new digest, and rotated back.
async fn endpoint_credentials<S: Corruptible>(store: &S, endpoints: &[String], log: &mut Transcript) {
    let (original, rotated) = (hash_token("agent-token-1"), hash_token("agent-token-1-rotated"));
    let unknown = |lookup: Result<AgentLookup, _>| lookup.map(|a| a == AgentLookup::Unknown);
    log.push(&store.revoke_endpoint(&endpoints[1]).await);
    log.push(&store.revoke_endpoint("ep_nosuchendpoint").await);
    log.push(&unknown(store.agent_by_token(&endpoints[1], &original).await));
    log.push(&store.rotate_endpoint(&endpoints[1], &rotated).await);
    log.push(&unknown(store.agent_by_token(&endpoints[1], &original).await));
    log.push(&unknown(store.agent_by_token(&endpoints[1], &rotated).await));
    log.push(&store.rotate_endpoint(&endpoints[1], &original).await);
    log.push(&unknown(store.agent_by_token(&endpoints[1], &original).await));
}

/// The two webhooks the operations ingest through (single, fan-out), after webhook management
/// (issue #14) was exercised on a third one: the owner's only; rotating; deleting.
async fn webhooks<S: Corruptible>(
    store: &S,
    humans: &[HumanScope],
    identities: &[QueueIdentity],
    log: &mut Transcript,
) -> Vec<String> {
    let alice = humans[0].human.id.clone();
    let single = store.create_webhook(&alice, "single", "s1", &identities[..1]).await.expect("webhook");
    // A fan-out to two endpoints (REQ-2): its copies share an instant, so no test read spans both.
    let fan_out = store.create_webhook(&alice, "fan-out", "s2", &[identities[1].clone(), identities[4].clone()]).await;
    let fan_out = fan_out.expect("webhook");
    log.push(&store.webhook_for_ingest_unscoped(&fan_out).await);
    log.push(&store.create_webhook("hu_nobody", "orphan", "s3", &identities[..1]).await);
    let doomed = store.create_webhook(&alice, "doomed", "s4", &identities[..1]).await.expect("webhook");
    log.push(&store.list_webhooks(&alice).await);
    log.push(&store.list_webhooks(&humans[1].human.id).await);
    log.push(&store.rotate_webhook_secret(&humans[1].human.id, &single, "stolen").await);
    log.push(&store.rotate_webhook_secret(&alice, &single, "s1-rotated").await);
    log.push(&store.webhook_for_ingest_unscoped(&single).await);
    log.push(&store.delete_webhook(&humans[1].human.id, &doomed).await);
    log.push(&store.delete_webhook(&alice, &doomed).await);
    log.push(&store.delete_webhook(&alice, &doomed).await);
    log.push(&store.webhook_for_ingest_unscoped(&doomed).await);
    log.push(&store.list_webhooks(&alice).await);
    vec![single, fan_out]
}

impl<S: Corruptible> Side<S> {
    /// The store's id of the `index`th todo seen; one past the end names no todo.
    pub(crate) fn todo_id(&self, index: usize) -> String {
        self.norm.nth("td", index).unwrap_or_else(|| "td_missing".to_string())
    }

    pub(crate) fn policy_actor(&self, human: usize, via_endpoint: bool) -> PolicyActor {
        PolicyActor {
            human_id: Some(self.humans[human].human.id.clone()),
            endpoint_id: via_endpoint.then(|| self.endpoints[human].clone()),
        }
    }

    /// The todo an `Op::Create` makes.
    fn new_todo(&self, op: &Op) -> NewTodo {
        let Op::Create { identity, title, key, max_attempts, by, payload } = op else { panic!("not a create: {op:?}") };
        let (created_by_kind, created_by_id) = match by {
            Creator::Human(h) => (CreatedByKind::Human, Some(self.humans[*h].human.id.clone())),
            Creator::Agent(a) => (CreatedByKind::Agent, Some(self.endpoints[*a].clone())),
            Creator::System => (CreatedByKind::System, None),
        };
        NewTodo {
            identity: self.identities[*identity].clone(),
            title: title.clone(),
            payload: payload.clone(),
            idempotency_key: key.clone(),
            max_attempts: *max_attempts,
            created_by_kind,
            created_by_id,
        }
    }

    /// A delivery to webhook `webhook`: one copy per target queue, as the ingest route makes.
    async fn ingest(&self, webhook: usize, delivery: &str, title: &str, key: &Option<String>) -> String {
        let store = &self.store;
        let webhook_id = &self.webhooks[webhook];
        let route = store.webhook_for_ingest_unscoped(webhook_id).await.expect("route").expect("webhook");
        let copies = route
            .targets
            .iter()
            .enumerate()
            .map(|(i, target)| NewTodo {
                identity: target.clone(),
                title: format!("{title}.{i}"),
                payload: Some(json!({"delivery": delivery})),
                idempotency_key: key.clone(),
                max_attempts: 2,
                created_by_kind: CreatedByKind::Ingest,
                created_by_id: Some(webhook_id.clone()),
            })
            .collect();
        format!("{:?}", store.ingest(webhook_id, delivery, copies).await)
    }

    /// Every admission, normalised and sorted: PostgreSQL orders them by queue then random
    /// policy id, so they compare as a set.
    async fn all_admissions(&mut self) -> String {
        let mut all: Vec<String> = match self.store.all_admissions_unscoped().await {
            Ok(all) => all.iter().map(|a| self.norm.of(a)).collect(),
            Err(error) => vec![format!("{error:?}")],
        };
        all.sort();
        all.join("\n")
    }

    /// Runs one operation and answers it normalised. Every operation is named here, so a new
    /// one must be placed in a group; each group's helper answers only its own.
    pub(crate) async fn apply(&mut self, op: &Op) -> String {
        let answer = match op {
            Op::Advance(_) | Op::SetClock(_) => "clock moved".to_string(),
            Op::Create { .. } | Op::CreateBatch(_) | Op::Ingest { .. } => self.answer_intake(op).await,
            Op::ClaimNext { .. }
            | Op::ClaimNextMany { .. }
            | Op::Claim { .. }
            | Op::Heartbeat { .. }
            | Op::Complete { .. }
            | Op::CompleteMany { .. }
            | Op::Fail { .. }
            | Op::Release { .. }
            | Op::RetryNow { .. }
            | Op::Get { .. } => self.answer_lifecycle(op).await,
            Op::SetPolicy { .. }
            | Op::ClearPolicy { .. }
            | Op::CorruptZone { .. }
            | Op::QueueAdmissions { .. }
            | Op::ReachAdmissions { .. }
            | Op::PolicyDetail { .. }
            | Op::PolicyAudit { .. } => self.answer_admission(op).await,
            Op::AllAdmissions => return self.all_admissions().await,
            Op::Reap
            | Op::Requeue
            | Op::Prune
            | Op::Discard { .. }
            | Op::ClearQueue { .. }
            | Op::Purge { .. }
            | Op::SetCapacity { .. }
            | Op::QueueCapacity => self.answer_upkeep(op).await,
            Op::ListTodos { .. } | Op::Route { .. } | Op::AgentLookup { .. } | Op::DeleteEndpoint { .. } => {
                self.answer_reads_and_endpoints(op).await
            }
        };
        self.norm.normalise(&answer)
    }

    /// The queue identity at index `identity`.
    fn queue(&self, identity: usize) -> &QueueIdentity {
        &self.identities[identity]
    }

    /// The queue identities at `indexes`, in order.
    fn queues(&self, indexes: &[usize]) -> Vec<QueueIdentity> {
        indexes.iter().map(|i| self.identities[*i].clone()).collect()
    }

    /// Answers a way work comes in: a create, a batch of creates, a webhook delivery (raw).
    async fn answer_intake(&self, op: &Op) -> String {
        let store = &self.store;
        match op {
            Op::Create { .. } => format!("{:?}", store.create_todo(self.new_todo(op)).await),
            Op::CreateBatch(creates) => {
                format!("{:?}", store.create_todos(creates.iter().map(|op| self.new_todo(op)).collect()).await)
            }
            Op::Ingest { webhook, delivery, title, key } => self.ingest(*webhook, delivery, title, key).await,
            other => unreachable!("not an intake operation: {other:?}"),
        }
    }

    /// Answers an agent's lifecycle call on todos: claim, heartbeat, complete, fail, release,
    /// retry, read (raw).
    async fn answer_lifecycle(&self, op: &Op) -> String {
        let store = &self.store;
        let id = |todo: &usize| self.todo_id(*todo);
        let who = |actor: &usize| &self.actors[*actor];
        match op {
            Op::ClaimNext { actor, queues, lease } => {
                format!("{:?}", store.claim_next(who(actor), &self.queues(queues), *lease).await)
            }
            Op::ClaimNextMany { actor, queues, lease, max } => {
                format!("{:?}", store.claim_next_many(who(actor), &self.queues(queues), *lease, *max).await)
            }
            Op::CompleteMany { actor, todos, result } => {
                let ids: Vec<String> = todos.iter().map(id).collect();
                format!("{:?}", store.complete_many(who(actor), &ids, result.clone()).await)
            }
            Op::Claim { actor, todo, lease } => format!("{:?}", store.claim(who(actor), &id(todo), *lease).await),
            Op::Heartbeat { actor, todo, lease } => {
                format!("{:?}", store.heartbeat(who(actor), &id(todo), *lease).await)
            }
            Op::Complete { actor, todo, result } => {
                format!("{:?}", store.complete(who(actor), &id(todo), result.clone()).await)
            }
            Op::Fail { actor, todo, result } => {
                format!("{:?}", store.fail(who(actor), &id(todo), result.clone()).await)
            }
            Op::Release { actor, todo } => format!("{:?}", store.release(who(actor), &id(todo)).await),
            Op::RetryNow { actor, todo } => format!("{:?}", store.retry_now(who(actor), &id(todo)).await),
            Op::Get { actor, todo } => format!("{:?}", store.get_todo(who(actor), &id(todo)).await),
            other => unreachable!("not a lifecycle call: {other:?}"),
        }
    }

    /// Answers a policy change or an admission read, and the REQ-9 corruption of a policy (raw).
    async fn answer_admission(&self, op: &Op) -> String {
        let store = &self.store;
        match op {
            Op::SetPolicy { identity, policy, human, via_endpoint } => {
                let policy = Policy::from_request(policy).expect("the workload draws valid policies");
                let actor = self.policy_actor(*human, *via_endpoint);
                format!("{:?}", store.set_policy(self.queue(*identity), &policy, &actor).await)
            }
            Op::ClearPolicy { identity, human } => {
                let actor = self.policy_actor(*human, false);
                format!("{:?}", store.clear_policy(self.queue(*identity), &actor).await)
            }
            Op::CorruptZone { identity } => format!("{:?}", store.corrupt_zone(self.queue(*identity)).await),
            Op::QueueAdmissions { identities } => {
                format!("{:?}", store.queue_admissions(&self.queues(identities)).await)
            }
            Op::ReachAdmissions { human } => {
                format!("{:?}", store.reach_admissions(&self.humans[*human].manages).await)
            }
            Op::PolicyDetail { identity } => format!("{:?}", store.policy_detail(self.queue(*identity)).await),
            Op::PolicyAudit { identity, limit } => {
                format!("{:?}", store.policy_audit(self.queue(*identity), *limit).await)
            }
            other => unreachable!("not an admission operation: {other:?}"),
        }
    }

    /// Answers the queues' upkeep: the sweepers, an operator discarding, clearing or purging,
    /// the intake capacity (raw).
    async fn answer_upkeep(&self, op: &Op) -> String {
        let store = &self.store;
        match op {
            Op::Reap => format!("{:?}", store.reap_lapsed_leases().await),
            Op::Requeue => format!("{:?}", store.requeue_due_retries().await),
            Op::Prune => format!("{:?}", store.prune_usage().await),
            Op::Discard { identity, todo } => {
                let by = self.policy_actor(0, false);
                format!("{:?}", store.discard_todo(self.queue(*identity), &self.todo_id(*todo), &by).await)
            }
            Op::ClearQueue { identity } => {
                format!("{:?}", store.clear_queue(self.queue(*identity), &self.policy_actor(1, true)).await)
            }
            Op::Purge { identity } => {
                format!("{:?}", store.purge_queue(self.queue(*identity), &self.policy_actor(0, false)).await)
            }
            Op::SetCapacity { max } => format!("{:?}", store.set_queue_capacity(*max, &self.humans[0].human.id).await),
            Op::QueueCapacity => format!("{:?}", store.queue_capacity().await),
            other => unreachable!("not an upkeep operation: {other:?}"),
        }
    }

    /// Answers a todo listing, a webhook's route, an agent's lookup, an endpoint's deletion (raw).
    async fn answer_reads_and_endpoints(&self, op: &Op) -> String {
        let store = &self.store;
        match op {
            Op::ListTodos { owners_of, queues, state, limit } => {
                let set = match owners_of {
                    Some(human) => TodoSet::Owners(self.humans[*human].reach.clone()),
                    None => TodoSet::Queues(self.queues(queues)),
                };
                format!("{:?}", store.list_todos(TodoQuery { set, state: *state, limit: *limit }).await)
            }
            Op::Route { webhook } => format!("{:?}", store.webhook_for_ingest_unscoped(&self.webhooks[*webhook]).await),
            Op::AgentLookup { agent } => {
                let token_hash = hash_token(&format!("agent-token-{agent}"));
                format!("{:?}", store.agent_by_token(&self.endpoints[*agent], &token_hash).await)
            }
            Op::DeleteEndpoint { human, endpoint } => {
                let scope = ScopeRef::Endpoint(self.endpoints[*endpoint].clone());
                format!("{:?}", store.delete_endpoint(&self.humans[*human], &scope).await)
            }
            other => unreachable!("not a read or an endpoint operation: {other:?}"),
        }
    }
}
