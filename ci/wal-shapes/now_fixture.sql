-- NOW: the schema the repository's migrations build today (the run script applies
-- migrations/*.sql in order before this file), and the owner the load and the loop use.
CREATE EXTENSION IF NOT EXISTS pg_walinspect;
INSERT INTO humans (id, name) VALUES ('hu_0123456789abcdef0123456789abcdef', 'bench');
INSERT INTO endpoints (id, slug, name, owner_human_id, token_hash, verbs)
VALUES ('ep_0123456789abcdef0123456789abcdef', 'bench', 'bench', 'hu_0123456789abcdef0123456789abcdef', 'unused', '{}');
