-- Issue #28: the admission write limiter (1 write/s, burst 10, per human on the API and the
-- board, per endpoint on MCP) holds across replicas. One row per key: the theoretical arrival
-- time of the generic cell rate algorithm (`models/src/rate.rs`), read and moved on in the one
-- statement that decides each write. A key that has been idle past its tolerance carries no
-- state worth keeping, so the usage sweep deletes rows whose time has passed.
CREATE TABLE write_limits (
    key  text PRIMARY KEY,
    tat  timestamptz NOT NULL
);
