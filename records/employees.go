package records

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Statements of employees.sql.
var (
	sqlEmployeeConflicts         = query("EmployeeConflicts")
	sqlCreateEmployeeImportTable = query("CreateEmployeeImportTable")
	sqlImportEmployees           = query("ImportEmployees")
	sqlEmployees                 = query("Employees")
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
		if err := PartnerLock(ctx, tx, partner); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, sqlCreateEmployeeImportTable); err != nil {
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
		crows, err := tx.Query(ctx, sqlEmployeeConflicts, args)
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
		err = tx.QueryRow(ctx, sqlImportEmployees, args).
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
	rows, err := s.pool.Query(ctx, sqlEmployees, partner)
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
