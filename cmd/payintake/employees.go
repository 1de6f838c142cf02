package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/payintake/payintake/normalize"
	"github.com/payintake/payintake/records"
)

func cmdEmployees(ctx context.Context, sub string, args []string, stdout, stderr io.Writer) error {
	switch sub {
	case "import":
		return cmdEmployeesImport(ctx, args, stdout, stderr)
	case "list":
		return cmdEmployeesList(ctx, args, stdout, stderr)
	}
	return usagef("employees: unknown command %q (want import or list)", sub)
}

// cmdEmployeesImport stores a file of mappings, all or nothing. A refused
// import prints one line per problem on stderr ("FILE: line N: ..."), then
// the one-sentence error.
func cmdEmployeesImport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, g := newFlagSet("employees import", stderr)
	partner := fs.String("partner", "", "partner ID (required)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if *partner == "" {
		return usagef("employees import needs --partner ID")
	}
	if len(pos) != 1 {
		return usagef("employees import takes one FILE (CSV: employee_ref,employee_id[,name])")
	}
	name := pos[0]
	f, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("cannot read %s: %w", name, err)
	}
	defer f.Close()
	rows, err := normalize.ReadEmployees(f)
	if err != nil {
		return fmt.Errorf("%s cannot be imported, nothing was imported: %w", name, err)
	}
	var maps []records.EmployeeMapping
	bad := 0
	for _, r := range rows {
		if r.Err != nil {
			fmt.Fprintf(stderr, "%s: line %d: %s\n", name, r.Line, r.Err.Message)
			bad++
			continue
		}
		maps = append(maps, records.EmployeeMapping{Line: r.Line, EmployeeRef: r.EmployeeRef, EmployeeID: r.EmployeeID, Name: r.Name})
	}
	if bad > 0 {
		return fmt.Errorf("%s has %d invalid line(s), so nothing was imported: correct them and import the whole file again", name, bad)
	}
	if len(maps) == 0 {
		return fmt.Errorf("%s has a header but no rows, so nothing was imported: add one line per employee (employee_ref,employee_id,name)", name)
	}
	e, err := g.open(ctx, g.logger(stderr), 2)
	if err != nil {
		return err
	}
	defer e.close()
	if err := e.needPartner(ctx, *partner); err != nil {
		return err
	}
	res, err := e.store.ImportEmployees(ctx, *partner, maps)
	var refused *records.ImportRefusedError
	if errors.As(err, &refused) {
		for _, c := range refused.Conflicts {
			fmt.Fprintf(stderr, "%s: %s\n", name, c.Message)
		}
		return fmt.Errorf("%s: %w", name, err)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: partner %s: %d mapping(s) added, %d already there, %d renamed\n", name, *partner, res.Added, res.Unchanged, res.Renamed)
	return nil
}

func cmdEmployeesList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, g := newFlagSet("employees list", stderr)
	partner := fs.String("partner", "", "partner ID (required)")
	return runList(ctx, fs, g, args, stdout, stderr, listing[records.Employee]{
		check: func() error {
			if *partner == "" {
				return usagef("employees list needs --partner ID")
			}
			return nil
		},
		fetch: func(e *env) ([]records.Employee, error) {
			if err := e.needPartner(ctx, *partner); err != nil {
				return nil, err
			}
			return e.store.Employees(ctx, *partner)
		},
		header: "EMPLOYEE_REF\tEMPLOYEE_ID\tNAME\tSOURCE\tSINCE",
		row: func(tw io.Writer, m records.Employee) {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.EmployeeRef, m.EmployeeID, orDash(m.Name), m.Source, m.CreatedAt.UTC().Format("2006-01-02"))
		},
	})
}
