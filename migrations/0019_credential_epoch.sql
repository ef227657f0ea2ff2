-- Issue #31 item 3: each replica answers an endpoint credential from a cache, and a change to
-- what a credential may do reaches every replica before the call that made it returns
-- (`engine/src/pg_store/credential_cache.rs`).
--
-- `credential_epoch` counts the changes to what any endpoint credential resolves to. A trigger
-- on every table the credential look-up reads moves it on in the writer's own transaction, so no
-- writer, present or future, can change a credential's reach without it; the same trigger
-- announces the new epoch to the replicas at commit.
CREATE TABLE credential_epoch (
    singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    epoch      bigint NOT NULL
);
INSERT INTO credential_epoch (singleton, epoch) VALUES (true, 1);

-- One row per serving replica: the newest epoch it has applied to its cache, how many times it
-- has renewed its lease (a writer times a silent replica by this count on its own clock), and
-- when its lease lapses by the database's clock (only to forget replicas long gone). A writer
-- waits until every replica still renewing has applied its epoch.
CREATE TABLE credential_replicas (
    replica_id     text PRIMARY KEY,
    applied_epoch  bigint NOT NULL,
    renewals       bigint NOT NULL DEFAULT 0,
    lease_until    timestamptz NOT NULL
);

CREATE FUNCTION credential_epoch_bump() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    bumped bigint;
BEGIN
    UPDATE credential_epoch SET epoch = epoch + 1 RETURNING epoch INTO bumped;
    PERFORM pg_notify('switchboard_credentials', bumped::text);
    RETURN NULL;
END
$$;

-- Endpoints: a new endpoint's credential is in no cache yet, so inserts do not count; every
-- column the look-up reads does (presence and digest bookkeeping do not).
CREATE TRIGGER endpoints_credential_epoch
    AFTER UPDATE OF token_hash, revoked, verbs, slug, owner_human_id, owner_team_id, created_by_human_id
    OR DELETE OR TRUNCATE ON endpoints
    FOR EACH STATEMENT EXECUTE FUNCTION credential_epoch_bump();
CREATE TRIGGER endpoint_grants_credential_epoch
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON endpoint_grants
    FOR EACH STATEMENT EXECUTE FUNCTION credential_epoch_bump();
CREATE TRIGGER team_members_credential_epoch
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON team_members
    FOR EACH STATEMENT EXECUTE FUNCTION credential_epoch_bump();
CREATE TRIGGER teams_credential_epoch
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON teams
    FOR EACH STATEMENT EXECUTE FUNCTION credential_epoch_bump();
