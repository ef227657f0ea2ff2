//! The MCP tools themselves: one function per tool group (claiming, work on a claimed todo,
//! reading and creating todos, the owner's admission and cancellation verbs, the self verbs),
//! each checking its arguments by name and answering the contract's JSON.
//!
//! The grant is checked once, in `call_tool`, before any group runs; a group never widens it.

use super::catalog::{Tool, granted};
use crate::push::api::set_presence_from;
use crate::state::AppState;
use crate::wire::{batch_items, max_attempts, parse_limit, todos_with_admission};
use crate::wire_types::requests::tool::{
    ClaimNextArgs, ClockInArgs, CompleteArgs, CreateTodoArgs, CreateTodosArgs, DiscardArgs, FailArgs, IdArgs,
    LeaseArgs, ListTodosArgs, MaybeQueueArgs, NoArgs, QueueArgs, ReleaseArgs, SetPolicyArgs,
};
use crate::wire_types::requests::{integer, read};
use crate::wire_types::{
    ClaimNextBody, ClaimedBody, Completed, CreatedBody, Detail, PolicyBody, PolicyCleared, PolicySaved, PresenceBody,
    QueueAdmissionEntry, QueueAdmissions, Removed, StatusBody, TodoBody, Todos,
};
use models::admission::Policy;
use models::error::{Error, Result};
use models::identity::{QueueIdentity, validate_queue_name};
use models::presence::Presence;
use models::scope::{Actor, AgentScope};
use models::store::{ClaimNext, OverrideBy, PolicyActor, Store, TodoQuery, TodoSet};
use models::todo::{CreatedByKind, NewTodo, TodoState, claims_max, lease_seconds, validate_ids};
use models::verbs::Verb;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

/// A granted tool's answer. Unknown names are `invalid_argument`, ungranted ones `forbidden`.
pub(super) async fn call_tool<S: Store>(
    state: &AppState<S>,
    agent: &AgentScope,
    tool: Tool,
    args: &Value,
) -> Result<Answer> {
    if !granted(agent, tool) {
        return Err(Error::forbidden(format!("{} is not in this endpoint's grant", tool.as_str())));
    }
    let actor = Actor::Agent(agent.clone());
    match tool {
        Tool::Granted(Verb::ClaimNext) => claim_next_tool(state, agent, &actor, args).await,
        Tool::Granted(Verb::Claim) => claim_tool(state, &actor, args).await,
        Tool::Granted(verb @ (Verb::Heartbeat | Verb::Complete | Verb::Fail | Verb::Release)) => {
            claimed_todo_tool(&state.store, &actor, verb, args).await
        }
        Tool::Granted(Verb::ListTodos) => list_todos_tool(&state.store, agent, args).await,
        Tool::Granted(Verb::GetTodo) => {
            let IdArgs { id } = read(args)?;
            answer(TodoBody::of(&state.store.get_todo(&actor, &id).await?, Detail::Full))
        }
        Tool::Granted(Verb::CreateTodo) => create_todo_tool(&state.store, agent, args).await,
        Tool::CreateTodos => create_todos_tool(&state.store, agent, args).await,
        Tool::Granted(verb @ (Verb::SetAdmissionPolicy | Verb::ClearAdmissionPolicy)) => {
            policy_tool(state, agent, verb, args).await
        }
        Tool::Granted(verb @ (Verb::DiscardTodo | Verb::ClearQueue)) => {
            cancel_tool(&state.store, agent, verb, args).await
        }
        Tool::Granted(Verb::AdmissionStatus) => admission_status_tool(&state.store, agent, args).await,
        Tool::ClockIn | Tool::ClockOut | Tool::Presence => self_verb_tool(state, agent, tool, args).await,
    }
}

/// `claim_next {queue?, lease_ttl_seconds?, max?}`. Without `max` (or with 1) the answer is the
/// single claim's; with `max` over 1, up to that many claims made in turn (issue #31 item 2),
/// answered as `{todos: [{todo, admission?}], empty: false}`, with the deferred list when a queue
/// holding pending work ended it short.
async fn claim_next_tool<S: Store>(
    state: &AppState<S>,
    agent: &AgentScope,
    actor: &Actor,
    args: &Value,
) -> Result<Answer> {
    let args: ClaimNextArgs = read(args)?;
    let lease = lease_seconds(integer(args.lease_ttl_seconds))?;
    let max = claims_max(integer(args.max))?;
    let queues = agent.narrow(args.queue.as_deref())?;
    // The store watches every queue it defers, on every surface (REQ-8, issue #28).
    if max > 1 {
        let many = state.store.claim_next_many(actor, &queues, lease, max).await?;
        return answer(ClaimNextBody::many(&many));
    }
    answer(match state.store.claim_next(actor, &queues, lease).await? {
        ClaimNext::Claimed(claimed) => ClaimNextBody::one(&claimed),
        ClaimNext::Empty { deferred } => ClaimNextBody::empty(&deferred),
    })
}

/// A tool's answer, serialised once: MCP carries it both as the structured content and as the
/// text of the result, so it goes from the typed body to JSON text without a `Value` between.
pub(super) type Answer = Box<RawValue>;

/// A tool's typed answer as the JSON object MCP carries.
fn answer(body: impl Serialize) -> Result<Answer> {
    serde_json::value::to_raw_value(&body)
        .map_err(|error| Error::internal(format!("an answer did not serialise: {error}")))
}

async fn claim_tool<S: Store>(state: &AppState<S>, actor: &Actor, args: &Value) -> Result<Answer> {
    let args: LeaseArgs = read(args)?;
    let lease = lease_seconds(integer(args.lease_ttl_seconds))?;
    let claimed = state.store.claim(actor, &args.id, lease).await?;
    answer(ClaimedBody::from(&claimed))
}

/// `heartbeat`, `complete`, `fail`, `release`: the claimer's work on a todo it holds.
async fn claimed_todo_tool<S: Store>(store: &S, actor: &Actor, verb: Verb, args: &Value) -> Result<Answer> {
    let todo = match verb {
        Verb::Heartbeat => {
            let args: LeaseArgs = read(args)?;
            store.heartbeat(actor, &args.id, lease_seconds(integer(args.lease_ttl_seconds))?).await?
        }
        Verb::Complete => {
            let args: CompleteArgs = read(args)?;
            let result = outcome_value(args.result, args.summary);
            match (args.id, args.ids) {
                (Some(_), Some(_)) => return Err(Error::invalid("ids", "give id or ids, not both")),
                (None, Some(ids)) => return complete_many(store, actor, &ids, result).await,
                (Some(id), None) => {
                    let todo = store.complete(actor, &id, result).await?;
                    return answer(Completed::One(Box::new(TodoBody::of(&todo, Detail::Listed))));
                }
                (None, None) => return Err(Error::invalid("id", "id is required")),
            }
        }
        Verb::Fail => {
            let args: FailArgs = read(args)?;
            store.fail(actor, &args.id, outcome_value(args.result, args.summary)).await?
        }
        _ => {
            let args: ReleaseArgs = read(args)?;
            store.release(actor, &args.id).await?
        }
    };
    answer(TodoBody::of(&todo, Detail::Listed))
}

/// `complete {ids, result?, summary?}` (issue #31 item 2): every listed todo the caller holds,
/// done in one transaction with the same result, or none (the refusal names the `id`).
async fn complete_many<S: Store>(store: &S, actor: &Actor, ids: &[String], result: Option<Value>) -> Result<Answer> {
    validate_ids(ids)?;
    let todos = store.complete_many(actor, ids, result).await?;
    answer(Completed::Many(Todos { todos: todos.iter().map(|todo| TodoBody::of(todo, Detail::Listed)).collect() }))
}

/// `list_todos {queue?, state?, limit?}`: newest first, within the grant.
async fn list_todos_tool<S: Store>(store: &S, agent: &AgentScope, args: &Value) -> Result<Answer> {
    let args: ListTodosArgs = read(args)?;
    let queues = agent.narrow(args.queue.as_deref())?;
    let state = args.state.as_deref().map(|s| TodoState::parse("state", s)).transpose()?;
    let limit = parse_limit(integer(args.limit))?;
    let todos = store.list_todos(TodoQuery { set: TodoSet::Queues(queues.into_owned()), state, limit }).await?;
    answer(Todos { todos: todos_with_admission(store, &todos, Detail::Listed).await? })
}

/// `create_todo`: a new todo on a granted queue, created by this endpoint.
async fn create_todo_tool<S: Store>(store: &S, agent: &AgentScope, args: &Value) -> Result<Answer> {
    let created = store.create_todo(agent_todo(agent, read(args)?)?).await?;
    answer(CreatedBody::from(&created))
}

/// `create_todos`: `create_todo`'s arguments for each of `todos` (at most
/// `TODOS_PER_BATCH_MAX`), created in one transaction and answered in order.
async fn create_todos_tool<S: Store>(store: &S, agent: &AgentScope, args: &Value) -> Result<Answer> {
    let CreateTodosArgs { todos } = read(args)?;
    let mut news = Vec::with_capacity(todos.len());
    for (index, item) in batch_items(&todos, "todos")?.iter().enumerate() {
        let within = |error: Error| error.within_item("todos", index);
        news.push(read(item).and_then(|args| agent_todo(agent, args)).map_err(within)?);
    }
    let created = store.create_todos(news).await?;
    answer(Todos { todos: created.iter().map(CreatedBody::from).collect() })
}

/// One todo an agent asks for: `create_todo`'s arguments, in one of its granted queues.
fn agent_todo(agent: &AgentScope, args: CreateTodoArgs) -> Result<NewTodo> {
    let new = NewTodo {
        identity: creation_target(agent, &args.queue)?,
        title: args.title,
        payload: args.payload.filter(|payload| !payload.is_null()),
        idempotency_key: args.idempotency_key,
        max_attempts: max_attempts(args.max_attempts)?,
        created_by_kind: CreatedByKind::Agent,
        created_by_id: Some(agent.endpoint_id.clone()),
    };
    new.validate()?;
    Ok(new)
}

/// The endpoint acting for its owner, as the audit records it.
fn acting(agent: &AgentScope) -> PolicyActor {
    PolicyActor { human_id: agent.acting_for_human_id.clone(), endpoint_id: Some(agent.endpoint_id.clone()) }
}

/// SPEC-0030 REQ-10: `set_admission_policy` / `clear_admission_policy`, only with the verb
/// granted (checked by `call_tool`), only on a queue this endpoint may manage (else not_found),
/// audited with the endpoint and its human.
async fn policy_tool<S: Store>(state: &AppState<S>, agent: &AgentScope, verb: Verb, args: &Value) -> Result<Answer> {
    let (queue, policy) = if verb == Verb::SetAdmissionPolicy {
        let SetPolicyArgs { queue, policy } = read(args)?;
        (queue, Some(policy))
    } else {
        let QueueArgs { queue } = read(args)?;
        (queue, None)
    };
    // The same write limiter as the operator API, keyed per endpoint (Security Requirements).
    state.admission_writes.check_endpoint(&state.store, &agent.endpoint_id).await?;
    let identity = agent.managed_queue(&queue)?;
    let Some(policy) = policy else {
        state.store.clear_policy(&identity, &acting(agent)).await?;
        return answer(PolicyCleared { queue: identity.queue, cleared: true });
    };
    let policy = Policy::from_request(&policy.0)?;
    let saved = state.store.set_policy(&identity, &policy, &acting(agent)).await?;
    answer(PolicySaved {
        queue: identity.queue,
        policy: saved.policy.as_ref().map(PolicyBody::from),
        status: StatusBody::from(&saved.status),
    })
}

/// Owner cancellation for agents (intake-capacity.md): `discard_todo` / `clear_queue`, opt-in
/// verbs only, on queues the endpoint manages (else not_found); claimed work is never touched.
async fn cancel_tool<S: Store>(store: &S, agent: &AgentScope, verb: Verb, args: &Value) -> Result<Answer> {
    if verb == Verb::DiscardTodo {
        let DiscardArgs { queue, id } = read(args)?;
        let identity = agent.managed_queue(&queue)?;
        store.discard_todo(&identity, &id, &acting(agent)).await?;
        return answer(Removed { queue: identity.queue, removed: 1 });
    }
    let QueueArgs { queue } = read(args)?;
    let identity = agent.managed_queue(&queue)?;
    let removed = store.clear_queue(&identity, &acting(agent)).await?;
    answer(Removed { queue: identity.queue, removed })
}

/// `admission_status {queue?}`: policy, usage and status of the granted queues (read-only, REQ-7).
async fn admission_status_tool<S: Store>(store: &S, agent: &AgentScope, args: &Value) -> Result<Answer> {
    let MaybeQueueArgs { queue } = read(args)?;
    let queues = agent.narrow(queue.as_deref())?;
    let admissions = store.queue_admissions(&queues).await?;
    let queues = queues
        .iter()
        .map(|identity| QueueAdmissionEntry::of(identity, admissions.iter().find(|a| &a.identity == identity)))
        .collect();
    answer(QueueAdmissions { queues })
}

/// `clock_in {for?}` (seconds; 1 h default, 8 h max), `clock_out`, `presence` (SPEC-0022).
async fn self_verb_tool<S: Store>(state: &AppState<S>, agent: &AgentScope, tool: Tool, args: &Value) -> Result<Answer> {
    let store = &state.store;
    let view = match tool {
        Tool::ClockIn | Tool::ClockOut => {
            let (presence, for_seconds) = if tool == Tool::ClockIn {
                let ClockInArgs { for_seconds } = read(args)?;
                (Presence::In, integer(for_seconds))
            } else {
                read::<NoArgs>(args)?;
                (Presence::Out, None)
            };
            let view = set_presence_from(store, &agent.endpoint_id, presence, for_seconds, OverrideBy::Agent).await?;
            // The clock-in digest may have rung a stream on this replica.
            state.push.capacity_changed();
            view
        }
        _ => {
            read::<NoArgs>(args)?;
            store.presence(&agent.endpoint_id).await?
        }
    };
    answer(PresenceBody::from(&view))
}

/// Nudges the push loops after a verb that changed what may be pushed.
pub(super) fn after_tool<S: Store>(state: &AppState<S>, tool: Tool, outcome: &Result<Answer>) {
    if outcome.is_err() {
        return;
    }
    match tool {
        Tool::Granted(Verb::CreateTodo) | Tool::CreateTodos => state.push.work_added(),
        Tool::Granted(
            Verb::Complete
            | Verb::Fail
            | Verb::Release
            | Verb::SetAdmissionPolicy
            | Verb::ClearAdmissionPolicy
            | Verb::DiscardTodo,
        ) => state.push.capacity_changed(),
        _ => {}
    }
}

/// `result` as given, or `{summary}` when only a summary is given.
fn outcome_value(result: Option<Value>, summary: Option<String>) -> Option<Value> {
    result.filter(|result| !result.is_null()).or_else(|| summary.map(|s| json!({ "summary": s })))
}

/// The queue a `create_todo` names: the endpoint's own queue of that name if granted, else the
/// one team queue of that name; anything else is outside the grant.
fn creation_target(agent: &AgentScope, queue: &str) -> Result<QueueIdentity> {
    validate_queue_name("queue", queue)?;
    let matching = agent.narrow(Some(queue))?;
    let own = matching.iter().find(|q| q.endpoint_id().is_some());
    own.or(matching.first())
        .cloned()
        .ok_or_else(|| Error::forbidden(format!("queue {queue} is outside this endpoint's grant")))
}
