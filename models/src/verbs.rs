//! The MCP verbs an endpoint may be granted (contract §5), and the default grant.

/// The drain and creation verbs a vend grants when it names none. The admission-policy and
/// cancellation verbs are deliberately absent: an agent never gets them unless asked for.
pub const DEFAULT_GRANT: &[&str] =
    &["list_todos", "get_todo", "claim", "claim_next", "complete", "fail", "heartbeat", "release", "create_todo"];

/// Every verb a vend may name.
pub const ALL_VERBS: &[&str] = &[
    "list_todos",
    "get_todo",
    "claim",
    "claim_next",
    "complete",
    "fail",
    "heartbeat",
    "release",
    "create_todo",
    "admission_status",
    "set_admission_policy",
    "clear_admission_policy",
    "discard_todo",
    "clear_queue",
];

/// Verbs that let an agent change its own budget or discard work: opt-in only, never defaulted.
pub const OPT_IN_ONLY: &[&str] = &["set_admission_policy", "clear_admission_policy", "discard_todo", "clear_queue"];

/// What granting `verb` lets an agent do, in one line: the vend wizard's checkbox labels and
/// the consent screen's summary. Empty for a verb this module does not know.
pub fn meaning(verb: &str) -> &'static str {
    match verb {
        "list_todos" => "List the todos of its queues.",
        "get_todo" => "Read one todo of its queues, payload included.",
        "claim" => "Claim a todo it names, when the queue's budget admits it.",
        "claim_next" => "Claim the next todo its queues' budgets admit.",
        "complete" => "Mark a todo it holds done.",
        "fail" => "Mark a todo it holds failed; it is retried while attempts remain.",
        "heartbeat" => "Extend the lease of a todo it holds.",
        "release" => "Give a todo it holds back to its queue, unfinished.",
        "create_todo" => "Add todos to its queues.",
        "admission_status" => "Read its queues' budgets, usage and why work waits.",
        "set_admission_policy" => "Create or change the budget of its queues.",
        "clear_admission_policy" => "Remove the budget of its queues.",
        "discard_todo" => "Discard a pending todo of its queues.",
        "clear_queue" => "Discard every pending todo of one of its queues.",
        _ => "",
    }
}

/// The warning an opt-in verb carries wherever it is offered (SPEC-0030 REQ-10: the wizard and
/// the consent screen "MUST say that they let the agent change its own budget").
pub fn warning(verb: &str) -> Option<&'static str> {
    match verb {
        "set_admission_policy" | "clear_admission_policy" => Some("This lets the agent change its own budget."),
        "discard_todo" | "clear_queue" => Some("This lets the agent discard work that nobody has done."),
        _ => None,
    }
}

pub fn is_known(verb: &str) -> bool {
    ALL_VERBS.contains(&verb)
}

#[cfg(test)]
mod tests {
    use super::*;

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
