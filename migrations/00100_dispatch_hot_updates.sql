-- +goose Up

-- Recording a vendor's answer updates every line twice (its ledger row and
-- its due line). With room left on each page and no index on a column the
-- answer changes, PostgreSQL updates the row in place (a HOT update): no new
-- entry in any index. The archive's daily scan of settled rows does without
-- an index (a sequential scan once a day), and the dispatcher finds a run's
-- pending lines by its own order (run, round, id) past a cursor, filtering
-- on state, instead of a partial index on state (which made every state
-- change a new index entry in three indexes).
ALTER TABLE dispatch_ledger SET (fillfactor = 50);
DROP INDEX dispatch_ledger_settled;
ALTER TABLE dispatch_due SET (fillfactor = 50);
DROP INDEX dispatch_due_pending;
DROP INDEX dispatch_due_run;
CREATE INDEX dispatch_due_order ON dispatch_due (run_id, round, id);

-- +goose Down
DROP INDEX dispatch_due_order;
CREATE INDEX dispatch_due_run ON dispatch_due (run_id, state);
CREATE INDEX dispatch_due_pending ON dispatch_due (run_id, round, id) WHERE state = 'pending';
ALTER TABLE dispatch_due RESET (fillfactor);
CREATE INDEX dispatch_ledger_settled ON dispatch_ledger (settled_at) WHERE state <> 'pending';
ALTER TABLE dispatch_ledger RESET (fillfactor);
