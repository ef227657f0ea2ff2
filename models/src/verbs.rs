//! The MCP verbs an endpoint may be granted (contract §5), and the default grant.

/// One MCP verb an endpoint may be granted, serialised (and stored in a grant) as its contract
/// name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verb {
    ListTodos,
    GetTodo,
    Claim,
    ClaimNext,
    Complete,
    Fail,
    Heartbeat,
    Release,
    CreateTodo,
    AdmissionStatus,
    SetAdmissionPolicy,
    ClearAdmissionPolicy,
    DiscardTodo,
    ClearQueue,
}

impl Verb {
    /// Every verb, in the order the vend wizard and the contract list them.
    pub const ALL: [Verb; 14] = [
        Verb::ListTodos,
        Verb::GetTodo,
        Verb::Claim,
        Verb::ClaimNext,
        Verb::Complete,
        Verb::Fail,
        Verb::Heartbeat,
        Verb::Release,
        Verb::CreateTodo,
        Verb::AdmissionStatus,
        Verb::SetAdmissionPolicy,
        Verb::ClearAdmissionPolicy,
        Verb::DiscardTodo,
        Verb::ClearQueue,
    ];

    /// The contract's name (`claim_next`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Verb::ListTodos => "list_todos",
            Verb::GetTodo => "get_todo",
            Verb::Claim => "claim",
            Verb::ClaimNext => "claim_next",
            Verb::Complete => "complete",
            Verb::Fail => "fail",
            Verb::Heartbeat => "heartbeat",
            Verb::Release => "release",
            Verb::CreateTodo => "create_todo",
            Verb::AdmissionStatus => "admission_status",
            Verb::SetAdmissionPolicy => "set_admission_policy",
            Verb::ClearAdmissionPolicy => "clear_admission_policy",
            Verb::DiscardTodo => "discard_todo",
            Verb::ClearQueue => "clear_queue",
        }
    }

    /// The verb of a contract name; None for a name that is not one.
    pub fn parse(name: &str) -> Option<Verb> {
        Verb::ALL.into_iter().find(|verb| verb.as_str() == name)
    }

    /// Whether a vend grants it when it names no verbs: the drain and creation verbs.
    pub const fn in_default_grant(self) -> bool {
        matches!(
            self,
            Verb::ListTodos
                | Verb::GetTodo
                | Verb::Claim
                | Verb::ClaimNext
                | Verb::Complete
                | Verb::Fail
                | Verb::Heartbeat
                | Verb::Release
                | Verb::CreateTodo
        )
    }

    /// Whether it lets an agent change its own budget or discard work: granted only when asked
    /// for, never by default.
    pub const fn is_opt_in_only(self) -> bool {
        matches!(self, Verb::SetAdmissionPolicy | Verb::ClearAdmissionPolicy | Verb::DiscardTodo | Verb::ClearQueue)
    }

    /// What granting it lets an agent do, in one line: the vend wizard's checkbox labels and the
    /// consent screen's summary.
    pub const fn meaning(self) -> &'static str {
        match self {
            Verb::ListTodos => "List the todos of its queues.",
            Verb::GetTodo => "Read one todo of its queues, payload included.",
            Verb::Claim => "Claim a todo it names, when the queue's budget admits it.",
            Verb::ClaimNext => "Claim the next todo its queues' budgets admit.",
            Verb::Complete => "Mark a todo it holds done.",
            Verb::Fail => "Mark a todo it holds failed; it is retried while attempts remain.",
            Verb::Heartbeat => "Extend the lease of a todo it holds.",
            Verb::Release => "Give a todo it holds back to its queue, unfinished.",
            Verb::CreateTodo => "Add todos to its queues.",
            Verb::AdmissionStatus => "Read its queues' budgets, usage and why work waits.",
            Verb::SetAdmissionPolicy => "Create or change the budget of its queues.",
            Verb::ClearAdmissionPolicy => "Remove the budget of its queues.",
            Verb::DiscardTodo => "Discard a pending todo of its queues.",
            Verb::ClearQueue => "Discard every pending todo of one of its queues.",
        }
    }

    /// The warning an opt-in verb carries wherever it is offered (SPEC-0030 REQ-10: the wizard
    /// and the consent screen "MUST say that they let the agent change its own budget").
    pub const fn warning(self) -> Option<&'static str> {
        match self {
            Verb::SetAdmissionPolicy | Verb::ClearAdmissionPolicy => Some("This lets the agent change its own budget."),
            Verb::DiscardTodo | Verb::ClearQueue => Some("This lets the agent discard work that nobody has done."),
            _ => None,
        }
    }
}

/// Which verbs a name table holds.
#[derive(Clone, Copy)]
enum Kept {
    All,
    DefaultGrant,
    OptInOnly,
}

impl Kept {
    const fn keeps(self, verb: Verb) -> bool {
        match self {
            Kept::All => true,
            Kept::DefaultGrant => verb.in_default_grant(),
            Kept::OptInOnly => verb.is_opt_in_only(),
        }
    }
}

/// The names of the verbs `kept` holds, in `Verb::ALL` order; `N` must be how many it holds (a
/// wrong `N` fails the build).
const fn names<const N: usize>(kept: Kept) -> [&'static str; N] {
    let mut names = [""; N];
    let (mut at, mut count) = (0, 0);
    while at < Verb::ALL.len() {
        if kept.keeps(Verb::ALL[at]) {
            names[count] = Verb::ALL[at].as_str();
            count += 1;
        }
        at += 1;
    }
    assert!(count == N, "the length of a verb name table is wrong");
    names
}

/// The names a vend grants when it names none (`Verb::in_default_grant`). The admission-policy
/// and cancellation verbs are deliberately absent: an agent never gets them unless asked for.
pub const DEFAULT_GRANT: &[&str] = &names::<9>(Kept::DefaultGrant);

/// Every verb's name a vend may grant.
pub const ALL_VERBS: &[&str] = &names::<14>(Kept::All);

/// The names of the verbs that let an agent change its own budget or discard work
/// (`Verb::is_opt_in_only`): opt-in only, never defaulted.
pub const OPT_IN_ONLY: &[&str] = &names::<4>(Kept::OptInOnly);

/// `Verb::meaning` of a stored verb name; empty for a name that is no verb.
pub fn meaning(verb: &str) -> &'static str {
    Verb::parse(verb).map_or("", Verb::meaning)
}

/// `Verb::warning` of a stored verb name.
pub fn warning(verb: &str) -> Option<&'static str> {
    Verb::parse(verb).and_then(Verb::warning)
}

pub fn is_known(verb: &str) -> bool {
    Verb::parse(verb).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_verb_name_parses_back_to_its_verb() {
        for verb in Verb::ALL {
            assert_eq!(Verb::parse(verb.as_str()), Some(verb));
        }
        assert_eq!(Verb::parse("create_todos"), None, "a tool, not a grantable verb");
        assert_eq!(ALL_VERBS[3], "claim_next");
    }

    #[test]
    fn no_opt_in_verb_is_in_the_default_grant() {
        for verb in OPT_IN_ONLY {
            assert!(!DEFAULT_GRANT.contains(verb), "{verb} must never be granted by default");
            assert!(is_known(verb));
        }
    }

    // SPEC-0030 REQ-10: every opt-in verb says what it lets the agent do to its budget or work.
    #[test]
    fn req10_every_verb_has_a_meaning_and_exactly_the_opt_in_ones_warn() {
        for verb in ALL_VERBS {
            assert!(meaning(verb).ends_with('.'), "{verb} has no one-line meaning");
            assert_eq!(warning(verb).is_some(), OPT_IN_ONLY.contains(verb), "{verb}");
        }
        for verb in ["set_admission_policy", "clear_admission_policy"] {
            assert!(warning(verb).is_some_and(|w| w.contains("change its own budget")), "{verb}");
        }
    }
}
