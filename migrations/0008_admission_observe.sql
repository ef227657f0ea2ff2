-- SPEC-0030 REQ-4 steps 4 and 5 inside the statement that takes the policy lock.
--
-- Under READ COMMITTED a statement's snapshot is taken when the statement starts, before it
-- waits on the policy row lock, so counts read by the locking statement itself would miss the
-- claim committed by the transaction it waited for. A VOLATILE PL/pgSQL function takes a fresh
-- snapshot for every query it runs: called on the locked policy row (after the lock, which the
-- call's arguments depend on), it sees what a separate statement after the lock would see. That
-- lets one statement lock, read, decide, claim and charge, so the policy lock is never held
-- across a round trip to the application.
--
-- It only observes. It returns the newest usage row; which window the clock reading falls in is
-- the application's to compute (models::window), and the caller uses that row only when it is
-- that window's.
--
-- It returns one row (none without a policy); ROWS 1 tells the planner so, which keeps the
-- statements that join on its result on index lookups.
--
-- p_across_queues and an empty p_candidate_id exist for the simulation's seeded bugs only.
CREATE FUNCTION admission_observe(
    p_policy_id     text,
    p_endpoint_id   text,
    p_team_id       text,
    p_queue         text,
    p_candidate_id  text,
    p_now           timestamptz,
    p_across_queues boolean
) RETURNS TABLE (
    observed_at         timestamptz,
    in_flight           bigint,
    earliest_lease      timestamptz,
    latest_window_start timestamptz,
    latest_used         integer
) LANGUAGE plpgsql VOLATILE ROWS 1 AS $$
BEGIN
    IF p_policy_id IS NULL THEN
        RETURN;
    END IF;
    -- The instant of record, read after the lock (clock_timestamp(), not now()).
    observed_at := coalesce(p_now, clock_timestamp());
    IF p_across_queues THEN
        SELECT count(*), min(t.lease_expires_at) INTO in_flight, earliest_lease FROM todos t
         WHERE t.state = 'claimed' AND t.id <> p_candidate_id
           AND (t.endpoint_id = p_endpoint_id OR t.team_id = p_team_id);
    ELSIF p_endpoint_id IS NOT NULL THEN
        SELECT count(*), min(t.lease_expires_at) INTO in_flight, earliest_lease FROM todos t
         WHERE t.state = 'claimed' AND t.endpoint_id = p_endpoint_id AND t.queue = p_queue
           AND t.id <> p_candidate_id;
    ELSE
        SELECT count(*), min(t.lease_expires_at) INTO in_flight, earliest_lease FROM todos t
         WHERE t.state = 'claimed' AND t.team_id = p_team_id AND t.queue = p_queue
           AND t.id <> p_candidate_id;
    END IF;
    SELECT w.window_start, w.used INTO latest_window_start, latest_used FROM admission_windows w
     WHERE w.policy_id = p_policy_id ORDER BY w.window_start DESC LIMIT 1;
    RETURN NEXT;
END
$$;

-- SPEC-0030 REQ-4 step 5 for the one-statement budgeted claim_next (engine
-- pg_store/claim.rs, "at once"): whether models::admission::decide admits, written as SQL so the
-- statement can decide and commit without a round trip to the application while it holds the
-- policy lock. decide refuses when a limit is 0 (paused), when usage has reached the window
-- limit, or when in-flight has reached its cap; with counts never negative, that is exactly
-- "every limit present is above its count". The engine test
-- admission_admits_agrees_with_decide compares the two on every combination of small limits and
-- counts, and the application re-runs decide on the values the statement used, for every claim
-- it admits or refuses.
CREATE FUNCTION admission_admits(
    max_in_flight          integer,
    max_claims_per_window  integer,
    in_flight              bigint,
    used                   bigint
) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT (max_claims_per_window IS NULL OR used < max_claims_per_window)
       AND (max_in_flight IS NULL OR in_flight < max_in_flight)
$$;
