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
}
