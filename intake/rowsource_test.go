package intake

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/payintake/payintake/apply"
	"github.com/payintake/payintake/normalize"
	"github.com/payintake/payintake/records"
)

// TestRowSourceMatchesReader reads files of several batches through
// rowSource (read in one goroutine, normalised in several) and through
// normalize.Reader.Next and Stage one row at a time: the same rows in the
// same order, and the same error at the same place. Read for some rows
// only (apply.ReadOptions.Only), it gives those of the Reader's rows.
func TestRowSourceMatchesReader(t *testing.T) {
	var rows strings.Builder
	for i := 1; i <= 3*rowBatchRows+17; i++ {
		switch {
		case i%97 == 0:
			fmt.Fprintf(&rows, "E%d,2026-13,BASE,1.00,USD,,,\r\n", i) // invalid period
		case i%101 == 0:
			fmt.Fprintf(&rows, "E%d,2026-11,BASE,\"1\"2,USD,,,\r\n", i) // malformed CSV
		case i%103 == 0:
			rows.WriteString(",,,,,,,\r\n") // blank: not a row
		default:
			fmt.Fprintf(&rows, " e%d ,2026-11,base,\"%d,%03d.5\",usd,7.5,%d.25,2026-11-30\r\n", i, i%7, i, i)
		}
	}
	const header = "employee_ref,pay_period,component,amount,currency,hours,rate,pay_date\r\n"
	batches := make(chan *rowBatch, keptBatches()) // shared, as an Intake shares it: a batch kept is read into again
	for name, tc := range map[string]struct {
		file    string
		wantErr normalize.Code // the file-level error after the rows, "" for io.EOF
	}{
		"rows of several batches":        {file: header + rows.String()},
		"one row":                        {file: header + "E1,2026-11,BASE,1.00,USD,,,\r\n"},
		"no row":                         {file: header},
		"invalid UTF-8 after 1,000 rows": {file: header + strings.Join(strings.SplitAfter(rows.String(), "\n")[:1000], "") + "E\xff,2026-11,BASE,1,USD,,,\r\n" + rows.String(), wantErr: normalize.CodeInvalidEncoding},
	} {
		t.Run(name, func(t *testing.T) {
			one := mustReader(t, tc.file)
			want, wantErr := readAll(func() (records.StagedRow, error) {
				row, err := one.Next()
				return apply.Stage(row), err
			})
			// Only: every third row and every row of the second batch.
			only := func(row int) bool { return row%3 == 1 || row/rowBatchRows == 1 }
			var wantOnly []records.StagedRow
			for _, r := range want {
				if only(r.Row) {
					wantOnly = append(wantOnly, r)
				}
			}
			for _, parallel := range []bool{true, false} {
				src := newRowSource(mustReader(t, tc.file), apply.ReadOptions{Parallel: parallel}, batches)
				defer src.Close()
				got, gotErr := readAll(src.Next)
				checkRows(t, parallel, got, want, gotErr, wantErr, tc.wantErr)
				if _, again := src.Next(); fmt.Sprint(again) != fmt.Sprint(gotErr) {
					t.Errorf("parallel %v: Next after the end: %v, want %v again", parallel, again, gotErr)
				}
				src = newRowSource(mustReader(t, tc.file), apply.ReadOptions{Parallel: parallel, Only: only}, batches)
				defer src.Close()
				got, gotErr = readAll(src.Next)
				t.Logf("parallel %v, only some rows: %d of %d", parallel, len(got), len(want))
				checkRows(t, parallel, got, wantOnly, gotErr, wantErr, tc.wantErr)
			}
		})
	}
}

// checkRows compares a rowSource's rows and error with the Reader's, and
// the error with code ("" for io.EOF).
func checkRows(t *testing.T, parallel bool, got, want []records.StagedRow, gotErr, wantErr error, code normalize.Code) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parallel %v: %d rows from rowSource, %d from the Reader; first difference: %s", parallel, len(got), len(want), firstDiff(got, want))
	}
	var pe *normalize.ParseError
	switch {
	case code == "" && !errors.Is(gotErr, io.EOF):
		t.Errorf("parallel %v: error after the rows: %v, want io.EOF", parallel, gotErr)
	case code != "" && (!errors.As(gotErr, &pe) || pe.Err != code):
		t.Errorf("parallel %v: error after the rows: %v, want %s", parallel, gotErr, code)
	case fmt.Sprint(gotErr) != fmt.Sprint(wantErr):
		t.Errorf("parallel %v: error %v, the Reader's %v", parallel, gotErr, wantErr)
	}
}

// readAll reads rows until an error.
func readAll(next func() (records.StagedRow, error)) ([]records.StagedRow, error) {
	var rows []records.StagedRow
	for {
		row, err := next()
		if err != nil {
			return rows, err
		}
		rows = append(rows, row)
	}
}

func mustReader(t *testing.T, file string) *normalize.Reader {
	t.Helper()
	r, err := normalize.NewReader(strings.NewReader(file), normalize.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func firstDiff(a, b []records.StagedRow) string {
	for i := range min(len(a), len(b)) {
		if !reflect.DeepEqual(a[i], b[i]) {
			return fmt.Sprintf("row %d: %+v against %+v", i, a[i], b[i])
		}
	}
	return "none in the rows both have"
}

// TestRowSourceCloseStopsEarly closes a rowSource after a few rows of a
// long file: Close returns once its goroutines have stopped (a leak would
// hang here), and the rows read were the file's first.
func TestRowSourceCloseStopsEarly(t *testing.T) {
	var b strings.Builder
	b.WriteString("employee_ref,pay_period,component,amount,currency\n")
	for i := 1; i <= 50*rowBatchRows; i++ {
		fmt.Fprintf(&b, "E%d,2026-11,BASE,1.00,USD\n", i)
	}
	src := newRowSource(mustReader(t, b.String()), apply.ReadOptions{KeysOnly: true, Parallel: true}, nil)
	for i := 1; i <= 3; i++ {
		row, err := src.Next()
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("E%d", i); row.EmployeeRef != want || row.Row != i || row.Hash != nil {
			t.Fatalf("row %d: %+v, want employee %s and no content hash (keys only)", i, row, want)
		}
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Next(); err == nil {
		t.Error("Next after Close gave a row")
	}
}
