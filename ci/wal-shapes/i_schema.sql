-- I: h, with a completed todo's history kept in its own row. The completion deletes the live row
-- and updates the todo row, which no index of the todo reads (only the listing indexes are left
-- on todos: the claim-path, in-flight and dedup indexes live on todo_live), so the update can be
-- HOT when the page has room: 92 % were at fillfactor 50, 54 % at 80, with 16 clients.
-- An attempt row is written only for an attempt that did not complete (failed, released, lapsed).
\ir h_schema.sql
ALTER TABLE todos SET (fillfactor = 50);
