// Package dispatch pushes a partner's approved pay lines to the payroll
// vendor's batch API so that every line version is paid exactly once, as
// SPEC "Outbound dispatch to the payroll vendor" says: deterministic line,
// batch and chunk keys (idempotencykeys.go), a durable ledger with a request-hash
// guard, a resume record per run, chunking, the response table, a token
// bucket and a pause on sustained 429s.
//
// It reads records, writes its own tables (migrations/00001_baseline.sql,
// "Dispatch") and speaks HTTP to the vendor; records knows nothing of it:
// the work of a run is queued by triggers in the transaction that locks the
// period or approves an exception.
package dispatch
