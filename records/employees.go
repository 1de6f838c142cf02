package records

import (
	"context"
	"errors"
	"fmt"
	"github.com/jackc/pgerrcode"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Employee is one mapping kept at onboarding: a partner's employee_ref and
// the platform's employee_id of that worker.
type Employee struct {
	PartnerID   string    `json:"partner"`
	EmployeeRef string    `json:"employee_ref"`
	EmployeeID  string    `json:"employee_id"`
	Name        string    `json:"name"`
	Source      string    `json:"source"` // import, or derived (created for an unknown reference)
	CreatedAt   time.Time `json:"created_at"`
}

// EmployeeMapping is one valid row of an import, with its line in the file.
type EmployeeMapping struct {
	Line                          int
	EmployeeRef, EmployeeID, Name string
}

// EmployeeConflict is why one line of an import cannot be applied.
type EmployeeConflict struct {
	Line    int
	Message string // one sentence that says what to do
}

// ImportRefusedError refuses a whole import: nothing was stored.
type ImportRefusedError struct{ Conflicts []EmployeeConflict }

func (e *ImportRefusedError) Error() string {
	return fmt.Sprintf("the import has %d conflicting line(s), so nothing was imported: correct them and import the whole file again", len(e.Conflicts))
}

// ImportResult counts what an import did.
type ImportResult struct {
	Added     int // new mappings
	Unchanged int // mappings already stored as given (a re-import)
	Renamed   int // existing mappings whose name the file changed
}

// employeeConflictsSQL finds every line of emp_in (the import) that would
// change a stored mapping, give one employee_id to two references (within
// the file or against any partner's mappings), or take an id of the form
// derived ids have for another reference. One row per conflict, by line.
const employeeConflictsSQL = `
WITH first_ref AS (
	SELECT DISTINCT ON (employee_ref) employee_ref, employee_id, line FROM emp_in ORDER BY employee_ref, line
), first_id AS (
	SELECT DISTINCT ON (employee_id) employee_id, employee_ref, line FROM emp_in ORDER BY employee_id, line
)
SELECT line, msg FROM (
	SELECT i.line, format('line %s: employee_ref %s is given employee_id %s here but %s on line %s; a reference maps to one employee_id: keep only the right line', i.line, i.employee_ref, i.employee_id, f.employee_id, f.line) AS msg
	FROM emp_in i JOIN first_ref f ON f.employee_ref = i.employee_ref AND f.employee_id <> i.employee_id
	UNION ALL
	SELECT i.line, format('line %s: employee_id %s is given to employee_ref %s here and to %s on line %s; an employee_id names one worker: correct one of the two lines', i.line, i.employee_id, i.employee_ref, f.employee_ref, f.line)
	FROM emp_in i JOIN first_id f ON f.employee_id = i.employee_id AND f.employee_ref <> i.employee_ref
	UNION ALL
	SELECT i.line, format('line %s: employee_ref %s is already mapped to employee_id %s (%s, %s) and a mapping never changes: give it employee_id %s, or remove the line; a different worker needs a new employee_ref', i.line, i.employee_ref, e.employee_id, e.source, to_char(e.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD'), e.employee_id)
	FROM emp_in i JOIN employees e ON e.partner_id = @partner AND e.employee_ref = i.employee_ref AND e.employee_id <> i.employee_id
	UNION ALL
	SELECT i.line, format('line %s: employee_id %s already belongs to employee_ref %s of partner %s; an employee_id names one worker: correct the employee_id', i.line, i.employee_id, e.employee_ref, e.partner_id)
	FROM emp_in i JOIN employees e ON e.employee_id = i.employee_id AND (e.partner_id <> @partner OR e.employee_ref <> i.employee_ref)
	UNION ALL
	SELECT i.line, format('line %s: employee_id %s has the form of the ids payintake derives for unknown references (emp_ and 20 hex digits) but is not the one of employee_ref %s (%s): use another employee_id', i.line, i.employee_id, i.employee_ref, derived_employee_id(@partner, i.employee_ref))
	FROM emp_in i WHERE i.employee_id ~ '^emp_[0-9a-f]{20}$' AND i.employee_id <> derived_employee_id(@partner, i.employee_ref)
) c ORDER BY line, msg`

// ImportEmployees stores the mappings of one file for partner, all or
// nothing: if any line conflicts it returns an *ImportRefusedError listing
// every conflict and stores nothing. Mappings already stored as given are
// left alone, so importing the same file again changes nothing (a non-empty
// name that differs is updated: the name is not part of the mapping). It
// holds the partner lock, so it is serialised with the partner's intake; a
// concurrent import for another partner that takes one of the same ids is
// caught by the unique constraint, and the import is checked again.
func (s *Store) ImportEmployees(ctx context.Context, partner string, rows []EmployeeMapping) (ImportResult, error) {
	var res ImportResult
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		res, err = s.importEmployees(ctx, partner, rows)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != pgerrcode.UniqueViolation {
			break
		}
	}
	return res, err
}

func (s *Store) importEmployees(ctx context.Context, partner string, rows []EmployeeMapping) (ImportResult, error) {
	var res ImportResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		res = ImportResult{}
		if err := partnerLock(ctx, tx, partner); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TEMP TABLE emp_in (line integer NOT NULL, employee_ref text NOT NULL,
			employee_id text NOT NULL, name text NOT NULL) ON COMMIT DROP`); err != nil {
			return fmt.Errorf("create import table: %w", err)
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"emp_in"}, []string{"line", "employee_ref", "employee_id", "name"},
			pgx.CopyFromSlice(len(rows), func(i int) ([]any, error) {
				r := rows[i]
				return []any{r.Line, r.EmployeeRef, r.EmployeeID, r.Name}, nil
			})); err != nil {
			return fmt.Errorf("stage the import: %w", err)
		}
		args := pgx.NamedArgs{"partner": partner}
		crows, err := tx.Query(ctx, employeeConflictsSQL, args)
		if err != nil {
			return fmt.Errorf("check the import: %w", err)
		}
		conflicts, err := pgx.CollectRows(crows, func(r pgx.CollectableRow) (EmployeeConflict, error) {
			var c EmployeeConflict
			err := r.Scan(&c.Line, &c.Message)
			return c, err
		})
		if err != nil {
			return fmt.Errorf("check the import: %w", err)
		}
		if len(conflicts) > 0 {
			return &ImportRefusedError{Conflicts: conflicts}
		}
		err = tx.QueryRow(ctx, `
			WITH given AS (
				SELECT DISTINCT ON (employee_ref) employee_ref, employee_id, name FROM emp_in ORDER BY employee_ref, line
			), renamed AS (
				UPDATE employees e SET name = g.name FROM given g
				WHERE e.partner_id = @partner AND e.employee_ref = g.employee_ref AND g.name <> '' AND e.name <> g.name
				RETURNING 1
			), added AS (
				INSERT INTO employees (partner_id, employee_ref, employee_id, name, source)
				SELECT @partner, employee_ref, employee_id, name, 'import' FROM given
				ON CONFLICT (partner_id, employee_ref) DO NOTHING
				RETURNING 1
			)
			SELECT (SELECT count(*) FROM added), (SELECT count(*) FROM renamed), (SELECT count(*) FROM given)`, args).
			Scan(&res.Added, &res.Renamed, &res.Unchanged)
		if err != nil {
			return fmt.Errorf("store the mappings: %w", err)
		}
		res.Unchanged -= res.Added + res.Renamed
		return nil
	})
	return res, err
}

// Employees lists the mappings of partner by employee_ref.
func (s *Store) Employees(ctx context.Context, partner string) ([]Employee, error) {
	rows, err := s.pool.Query(ctx, `SELECT partner_id, employee_ref, employee_id, name, source, created_at
		FROM employees WHERE partner_id = $1 ORDER BY employee_ref`, partner)
	if err != nil {
		return nil, fmt.Errorf("list employees of partner %q: %w", partner, err)
	}
	es, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Employee, error) {
		var e Employee
		err := r.Scan(&e.PartnerID, &e.EmployeeRef, &e.EmployeeID, &e.Name, &e.Source, &e.CreatedAt)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("list employees of partner %q: %w", partner, err)
	}
	return es, nil
}
