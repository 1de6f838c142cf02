package apply

import (
	"github.com/payintake/payintake/normalize"
	"github.com/payintake/payintake/records"
)

// The set-based heart of processing. Each statement runs once per envelope
// over all its staged rows; none runs once per row. A webhook's one change
// goes through the same statements (applyWebhook). Named arguments:
// @partner, @seq (bigint, may be NULL), @env (envelope id; NULL for a
// webhook), @by (what writes: "envelope N" or "webhook ID"), @file_rejected,
// @held (how a held row's message names it: NULL "this row", a
// webhook's "the change"). A webhook's row has line and row_no 0, stored as
// NULL. The messages of every outcome are written here, for files and
// webhooks alike.

// sqlCode is a reason code as an SQL literal, so that the statements below
// write the codes normalize names rather than spelling them again (the
// codes are snake_case words: nothing to escape).
func sqlCode(c normalize.Code) string { return "'" + string(c) + "'" }

// dupLinesShown is how many lines of a duplicate group its message names.
const dupLinesShown = "5"

// employeesSQL fills "emp" (empDDL) with the unmapped employees: each
// distinct employee_ref of the valid staged rows that has no mapping, with
// the id it would derive and its kind: NULL when the partner creates
// mappings (--unknown-employee create); else employee_taken (the derived id
// belongs to another employee: rejected), unknown_rejected or unknown_held
// by the partner's policy. A reference not in emp is mapped. Per distinct
// reference, so the derived id is computed once per unmapped employee, not
// once per row; and a resubmission, whose employees are all mapped, leaves
// emp empty, so classify joins nothing for them. It is a table rather than
// a CTE of classify so that onboarding takes the references from it (one
// row each) instead of sorting every created row of classified for them.
//
// A file's rows come with their distinct references already (empRefsSQL);
// a webhook's change and a replay's legs are grouped from stage.
var employeesSQL = query("Employees")

// empRefsSQL is employeesSQL for a file's rows, whose distinct references
// stageSource collected while staging them (empRefs) and processing copied
// into emp_refs (empRefsDDL): no grouping of every staged row (1,000,000
// rows of a file for its 182,062 employees), and a resubmission, whose
// employees are all mapped, anti-joins one row per employee with the
// mappings instead of every row.
var empRefsSQL = query("EmpRefs")

// employeeRejectsSQL tells whether any staged row is rejected for its
// employee (an all-or-nothing file is then rejected whole).
var employeeRejectsSQL = query("EmployeeRejects")

// classifySQL decides every row's outcome against the stored records, in the
// order of docs/contract.md: invalid, duplicate in file, employee unknown and
// rejected (or its derived id taken), file rejected (all-or-nothing),
// component code unknown and held (a valid staged row with a field:
// records.StagedRow.HeldCode; its key's component is the partner's code,
// which no record should be compared with, so it comes before the
// employee's hold, whose approval would apply the row under that code),
// employee unknown and held, new key (created, or held if the period is
// closed), identical content (unchanged), older sequence (stale), locked
// record or closed period (held), else updated. A record's employee_ref
// always has a mapping (the schema guarantees it), so the employee checks only ever
// meet new keys. It writes into classified every row, or with
// @skip_unchanged every row but the unchanged ones (skipUnchanged).
//
// The duplicate check comes in three forms (dupCheck); the statement for
// each is built once, below. The CTEs k and m end with OFFSET 0 so that
// PostgreSQL computes each row's kind and outcome once: inlined, every
// reference to them repeats the whole CASE (about 0.9 s of CPU per
// 1,000,000 rows). In m, the kinds that are their own outcome and carry
// no code or message (unchanged, created, updated: nearly every row of a
// payroll file) are answered by one test before the CASE over every kind:
// walking the whole CASE costs an unchanged row about 29 text comparisons,
// three times the CPU of the one test.
//
// The joins with emp and period_locks are left out of the statement when
// they can match nothing (classifyJoins): an empty emp (every employee of
// the file is mapped: any resubmission) or a partner with no closed period
// (most partners most of the time). A LEFT JOIN with an empty table still
// hashes every staged row's employee_ref or pay_period and carries the
// NULLs through: about 0.4 s of CPU per 1,000,000 rows.
func classifySQL(dup dupCheck, j classifyJoins) string { return classifySQLs[dup][j] }

// classifyJoins names the lookups classify makes besides records (and the
// duplicates): joinEmp when emp holds a row, joinLocks when the partner has
// a closed period. Without one, the statement reads its columns as NULL,
// which is what the join gives a row that finds no match.
type classifyJoins int

const (
	joinEmp classifyJoins = 1 << iota
	joinLocks
	allJoins = joinEmp | joinLocks
)

// dupCheck is how classify finds the keys a file repeats.
type dupCheck int

const (
	// dupAll: every valid staged row may repeat another (a webhook, a
	// replay's legs): a cheap aggregate over key_hash finds the candidates.
	dupAll dupCheck = iota
	// dupCandidates: only rows whose key_hash is in @dup_candidates (the
	// keys keyFilter saw more than once while staging) may repeat.
	dupCandidates
	// dupNone: no row repeats another (keyFilter saw no key twice, or
	// its candidates were found distinct on the real key).
	dupNone
)

var classifySQLs = func() (out [3][allJoins + 1]string) {
	dupKeys := [...]string{
		dupAll: `dup_keys AS (
	SELECT key_hash FROM stage WHERE code IS NULL GROUP BY key_hash HAVING count(*) > 1
), `,
		dupCandidates: `dup_keys AS (SELECT unnest(@dup_candidates::bigint[]) AS key_hash), `,
		dupNone:       "",
	}
	for dup, keys := range dupKeys {
		for j := classifyJoins(0); j <= allJoins; j++ {
			out[dup][j] = buildClassifySQL(keys, j)
		}
	}
	return out
}()

// buildClassifySQL is classify's statement with dupKeys, the CTE
// "dup_keys" that names the key hashes that may repeat, or without the
// duplicate check when dupKeys is empty; with the joins j names.
func buildClassifySQL(dupKeys string, j classifyJoins) string {
	// The employee and period lock columns, their cases of kind and their
	// joins; NULL without the join.
	empCols, empRejected, empHeld, empJoin := "NULL::text AS derived_id, NULL::text AS employee_kind", "", "", ""
	if j&joinEmp != 0 {
		empCols = "e.derived_id, e.kind AS employee_kind"
		empRejected = `
			WHEN e.kind IN ('employee_taken', 'unknown_rejected') THEN e.kind`
		empHeld = `
			WHEN e.kind = 'unknown_held' THEN 'unknown_held'`
		empJoin = `
	LEFT JOIN emp e ON s.code IS NULL AND e.employee_ref = s.employee_ref`
	}
	lockCol, lockNew, lockOld, lockJoin := "NULL::text AS period_reason", "", "", ""
	if j&joinLocks != 0 {
		lockCol = "pl.reason AS period_reason"
		lockNew = `
			WHEN r.id IS NULL AND pl.reason IS NOT NULL THEN 'period_locked'`
		lockOld = `
			WHEN pl.reason IS NOT NULL THEN 'period_locked'`
		lockJoin = `
	LEFT JOIN period_locks pl ON s.code IS NULL AND pl.partner_id = @partner AND pl.pay_period = s.pay_period`
	}
	dup, dupCols, dupCase, dupJoin := "", "NULL::text AS dup_lines, NULL::bigint AS dup_n", "", ""
	if dupKeys != "" {
		dup = dupKeys + `dup AS (
	-- The keys that repeat: the candidates of dup_keys, grouped on the
	-- real key. A group's message names its first dupLinesShown lines and
	-- its size, never every line: a key repeated n times must not cost n²
	-- (each of its n rows quoting all n lines).
	SELECT employee_ref, pay_period, component, count(*) AS n,
		array_to_string((array_agg(line ORDER BY line))[1:` + dupLinesShown + `], ', ') AS lines
	FROM stage WHERE code IS NULL AND key_hash IN (SELECT key_hash FROM dup_keys)
	GROUP BY employee_ref, pay_period, component HAVING count(*) > 1
), `
		dupCols = "d.lines AS dup_lines, d.n AS dup_n"
		dupCase = `
			WHEN d.lines IS NOT NULL THEN 'duplicate'`
		dupJoin = `
	LEFT JOIN dup d ON s.code IS NULL
		AND d.employee_ref = s.employee_ref AND d.pay_period = s.pay_period AND d.component = s.component`
	}
	return `
INSERT INTO classified
WITH ` + dup + `k AS (
	SELECT s.*, r.id AS record_id, r.last_seq, r.locked_reason, ` + lockCol + `, ` + dupCols + `,
		` + empCols + `,
		CASE
			WHEN s.code IS NOT NULL THEN 'invalid'` + dupCase + empRejected + `
			WHEN @file_rejected::boolean THEN 'file_rejected'
			WHEN s.field IS NOT NULL THEN 'component_held'` + empHeld + lockNew + `
			WHEN r.id IS NULL THEN 'created'
			WHEN r.content_hash = s.content_hash THEN 'unchanged'
			WHEN @seq::bigint IS NOT NULL AND r.last_seq > @seq::bigint THEN 'stale'
			WHEN r.locked_reason IS NOT NULL THEN 'record_locked'` + lockOld + `
			ELSE 'updated'
		END AS kind
	FROM stage s` + empJoin + `
	LEFT JOIN records r ON s.code IS NULL AND r.partner_id = @partner
		AND r.employee_ref = s.employee_ref AND r.pay_period = s.pay_period AND r.component = s.component` + lockJoin + dupJoin + `
	OFFSET 0
), m AS (
	SELECT k.*,
		CASE WHEN kind IN ('unchanged', 'created', 'updated') THEN kind ELSE CASE kind
			WHEN 'invalid' THEN 'rejected' WHEN 'duplicate' THEN 'rejected' WHEN 'file_rejected' THEN 'rejected'
			WHEN 'employee_taken' THEN 'rejected' WHEN 'unknown_rejected' THEN 'rejected'
			WHEN 'period_locked' THEN 'held' WHEN 'record_locked' THEN 'held' WHEN 'unknown_held' THEN 'held'
			WHEN 'component_held' THEN 'held'
			ELSE kind
		END END AS outcome,
		CASE WHEN kind IN ('unchanged', 'created', 'updated') THEN NULL ELSE CASE kind
			WHEN 'invalid' THEN code WHEN 'duplicate' THEN ` + sqlCode(normalize.CodeDuplicateKeyInFile) + `
			WHEN 'file_rejected' THEN ` + sqlCode(normalize.CodeFileRejected) + `
			WHEN 'period_locked' THEN ` + sqlCode(normalize.CodePeriodLocked) + `
			WHEN 'record_locked' THEN ` + sqlCode(normalize.CodeRecordLocked) + `
			WHEN 'stale' THEN ` + sqlCode(normalize.CodeSuperseded) + `
			WHEN 'employee_taken' THEN ` + sqlCode(normalize.CodeUnknownEmployee) + `
			WHEN 'unknown_rejected' THEN ` + sqlCode(normalize.CodeUnknownEmployee) + `
			WHEN 'unknown_held' THEN ` + sqlCode(normalize.CodeUnknownEmployee) + `
			WHEN 'component_held' THEN ` + sqlCode(normalize.CodeUnknownComponent) + `
		END END AS out_code,
		CASE WHEN kind IN ('invalid', 'component_held') THEN field WHEN kind = employee_kind THEN 'employee_ref' END AS out_field,
		CASE WHEN kind IN ('unchanged', 'created', 'updated') THEN NULL ELSE CASE kind
			WHEN 'invalid' THEN message
			-- normalize's, as an invalid row's: it names the profile the
			-- file was read with, which only the reader knows.
			WHEN 'component_held' THEN message
			WHEN 'unknown_rejected' THEN format('employee %s is not onboarded (no employee_id is mapped to this reference) and unknown employees are rejected, so this row was not applied: ask the platform to onboard the employee (payintake employees import), then send the row again in a new file', employee_ref)
			WHEN 'employee_taken' THEN format('employee %s is not onboarded and the id it would be given (%s) already belongs to another employee, so this row was not applied: ask the platform to onboard the employee with its own employee_id (payintake employees import), then send the row again in a new file', employee_ref, derived_id)
			WHEN 'unknown_held' THEN format('employee %s is not onboarded (no employee_id is mapped to this reference), so this row was not applied; it is held as an exception for a reviewer, whose approval onboards the employee and applies the row: do not resend it', employee_ref)
			WHEN 'duplicate' THEN CASE WHEN dup_n <= ` + dupLinesShown + ` THEN
				format('employee %s, period %s, component %s appears on lines %s of this file, so none of these rows was applied: send one row per employee, period and component in a new file', employee_ref, pay_period, component, dup_lines)
			ELSE
				format('employee %s, period %s, component %s appears %s times in this file (first on lines %s, …), so none of these rows was applied: send one row per employee, period and component in a new file', employee_ref, pay_period, component, dup_n, dup_lines)
			END
			WHEN 'file_rejected' THEN 'this row is valid but was not applied: the file is processed all-or-nothing and other rows were rejected; correct them and send the whole file again under a new file name'
			WHEN 'period_locked' THEN format('pay period %s is closed (%s), so %s was not applied; it is held as an exception for a reviewer: do not resend it', pay_period, period_reason, coalesce(@held::text, 'this row'))
			WHEN 'record_locked' THEN format('this record is locked (%s), so the change was not applied; it is held as an exception for a reviewer: do not resend it', locked_reason)
			WHEN 'stale' THEN format('a newer file (sequence %s) already wrote this record and this file has sequence %s, so the row was not applied', last_seq, @seq::bigint)
		END END AS out_message
	FROM k` + skipUnchanged + `
	OFFSET 0
)
SELECT row_no, line, employee_ref, pay_period, component, amount, currency, hours, rate, pay_date,
	content_hash, record_id, outcome, out_code, out_message, out_field
FROM m`
}

// skipUnchanged leaves the unchanged rows out of classified when
// @skip_unchanged is true (classifyStaged says when), before m composes
// their outcome: nothing reads them afterwards but the outcome counts,
// which take them as the staged rows not in classified, and the result
// file, which takes their lines from staging's (storeMerged). An
// unchanged row is ~99% of a payroll resubmission, and classify wrote each
// into classified (1,000,000 wide rows, more than temp_buffers holds with
// stage) for the counts and the result file to read it back. A NULL
// @skip_unchanged (a webhook, a replay) keeps every row.
const skipUnchanged = `
	WHERE @skip_unchanged::boolean IS NOT TRUE OR kind <> 'unchanged'`

// applyStatement is one statement of applySQL. needs, if set, tells from the
// outcome counts (and whether the file has a sequence number) whether the
// statement has any row to write; a statement that has none is skipped
// rather than scanning classified for nothing.
type applyStatement struct {
	sql    string
	needs  func(counts map[string]int, seq bool) bool
	result bool // builds the result file: only for envelopes
	// closes returns the envelope_id of each exception it closes, whose
	// review report is then written if it was its envelope's last open one
	// (records.WriteReviewReports).
	closes bool
	probes bool // joins classified with records by an index: probeRecords
}

func updated(c map[string]int, _ bool) bool { return c[string(records.OutcomeUpdated)] > 0 }
func unchanged(c map[string]int, seq bool) bool {
	return seq && c[string(records.OutcomeUnchanged)] > 0
}
func created(c map[string]int, _ bool) bool { return c[string(records.OutcomeCreated)] > 0 }
func held(c map[string]int, _ bool) bool    { return c[string(records.OutcomeHeld)] > 0 }

// onboardSQL onboards the unknown employees of emp that have a created row
// (see applySQL): those of created rows of classified, or, with created
// empty, all of them (each has a created row: a pure first file,
// applyStaged, which has no classified).
func onboardSQL(created string) string {
	return `INSERT INTO employees (partner_id, employee_ref, employee_id, source)
	SELECT @partner, employee_ref, derived_id, 'derived'
	FROM emp
	WHERE kind IS NULL` + created + `
	ORDER BY employee_ref COLLATE "C"`
}

// insertRecordsSQL inserts the created rows of from (a table and its
// condition): classified's, or a pure first file's straight from stage.
func insertRecordsSQL(from string) string {
	return `INSERT INTO records (partner_id, employee_ref, pay_period, component, amount, currency, hours, rate,
		pay_date, content_hash, last_seq, envelope_id, line)
	SELECT @partner, employee_ref, pay_period, component, amount, currency, hours, rate,
		pay_date, content_hash, @seq::bigint, @env::bigint, nullif(line, 0)
	FROM ` + from
}

// applySQL writes the effects of the classified rows, in order.
var applySQL = []applyStatement{
	// History: the version being replaced, before it is replaced.
	{needs: updated, probes: true, sql: query("ApplyHistory")},

	{needs: updated, probes: true, sql: query("ApplyUpdated")},

	// A newer file confirming a record moves its sequence on, so an older
	// file arriving later is stale rather than an update. (classify keeps
	// the unchanged rows of a file with a sequence number in classified
	// for this: classifyStaged.)
	{needs: unchanged, sql: query("ApplyUnchangedSeq")},

	// An unknown employee of a created row is onboarded with the derived id
	// (--unknown-employee create; the other policies never create a row of
	// an unmapped reference). Before the records, which reference it. The
	// references come from emp, one row each, in the order of the index
	// they go into; when every row of the file was created (@all_created:
	// a first file), each unmapped reference has a created row, so
	// classified is not read at all. A plain INSERT: classify found these
	// references unmapped, and under the partner lock (which imports take
	// too) nothing can map them meanwhile; should one be mapped anyway, the
	// primary key refuses the insert loudly. ON CONFLICT DO NOTHING, which
	// only hid that, cost a speculative insertion per employee (about a
	// third of this statement).
	{needs: created, sql: onboardSQL(`
		AND (@all_created::boolean OR employee_ref IN (SELECT employee_ref FROM classified WHERE outcome = 'created'))`)},

	{needs: created, sql: insertRecordsSQL(`classified WHERE outcome = 'created'`)},

	// One open exception per record: a different proposal supersedes the open one ...
	{needs: held, closes: true, sql: query("ApplySupersede")},

	// ... and an identical re-proposal does not open a second one.
	// A row held for its component code keeps the code as partner_code too:
	// its component becomes the one a reviewer approves it with.
	{needs: held, sql: `INSERT INTO exceptions (partner_id, employee_ref, pay_period, component, record_id, code,
		current, proposed, proposed_hash, differing, envelope_id, line, row_no, partner_code)
	SELECT @partner, c.employee_ref, c.pay_period, c.component, r.id, c.code,
		cur.j, prop.j, c.content_hash,
		` + records.DifferingSQL("prop.j", "cur.j") + `,
		@env::bigint, nullif(c.line, 0), nullif(c.row_no, 0),
		CASE WHEN c.code = ` + sqlCode(normalize.CodeUnknownComponent) + ` THEN c.component END
	FROM classified c
	-- (no record for a row held for its code: its key's component is the
	-- partner's code, compared with no record)
	LEFT JOIN records r ON r.id = c.record_id AND c.code <> ` + sqlCode(normalize.CodeUnknownComponent) + `
	CROSS JOIN LATERAL (SELECT CASE WHEN r.id IS NOT NULL THEN ` + records.FieldsJSON("r") + ` END) AS cur(j)
	CROSS JOIN LATERAL (SELECT ` + records.FieldsJSON("c") + `) AS prop(j)
	WHERE c.outcome = 'held' AND NOT EXISTS (
		SELECT 1 FROM exceptions e WHERE e.status = 'open' AND e.partner_id = @partner
			AND e.employee_ref = c.employee_ref AND e.pay_period = c.pay_period AND e.component = c.component)
	ORDER BY c.row_no`}, // exception ids follow the file's order

	// The open exception of a held key is the one just opened (or kept).
	{needs: held, sql: query("ApplyLinkSuperseded")},

	// The result file: staging's lines with classify's decisions
	// (resultLines.storeMerged).
	{result: true},
}
