package records

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"
)

// Statements of resultworkbooks.sql.
var (
	sqlNoteWorkbookResult   = query("NoteWorkbookResult")
	sqlResultWorkbookChunks = query("ResultWorkbookChunks")
)

// WorkbookResultSuffix ends a result workbook's name (NAME.result.xlsx),
// beside a result file's NAME.result.csv (ResultSuffix).
const WorkbookResultSuffix = ".result.xlsx"

// WorkbookBuilder writes a result file (resultCSV, its stored lines as
// normalize lays them out) as a workbook to w, keeping any temporary file
// in tmpDir. Package workbook's ResultWorkbook is the one the engine gives:
// the store keeps the bytes it writes and knows nothing of their format.
type WorkbookBuilder func(w io.Writer, resultCSV io.Reader, tmpDir string) error

// storeResultWorkbook builds, in tx, the workbook of envelope id's stored
// result lines (written in tx) with book and stores its bytes in
// result_workbooks, returning their size. It is the only time the workbook
// is built: every download and every repeat reads these bytes. The
// workbook is spooled to an unlinked file between the two (tx's connection
// reads the lines, then copies the workbook, not both at once), so memory
// stays flat whatever the number of rows.
func (s *Store) storeResultWorkbook(ctx context.Context, tx pgx.Tx, id int64, book WorkbookBuilder) (int64, error) {
	what := fmt.Sprintf("result of envelope %d", id)
	f, size, err := s.spoolFile("result workbook", func(w io.Writer) error {
		pr, pw := io.Pipe()
		read := make(chan struct{})
		go func() {
			defer close(read)
			pw.CloseWithError(writeChunks(ctx, tx, pw, what, sqlResultChunks, id))
		}()
		err := book(w, pr, s.spoolDir)
		pr.CloseWithError(errors.New("the workbook is written"))
		<-read // tx is free again
		if err != nil {
			return fmt.Errorf("%s as a workbook: %w", what, err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if err := copyChunks(ctx, tx, pgx.Identifier{"result_workbooks"}, []string{"envelope_id", "n", "data"}, id, 0, f, size); err != nil {
		return 0, fmt.Errorf("store the %s as a workbook: %w", what, err)
	}
	return size, nil
}

// writeResultWorkbook writes the stored result workbook of env (an
// outcome envelope whose ResultFormat is xlsx) to w: the bytes built when
// it was processed, checked against the size noted then.
func writeResultWorkbook(ctx context.Context, q querier, env Envelope, w io.Writer) error {
	n := byteCount(0)
	if err := copyChunkRows(ctx, q, sqlResultWorkbookChunks, "the result workbook of envelope", env.ID, io.MultiWriter(w, &n)); err != nil {
		return err
	}
	if int64(n) != env.ResultSize {
		return fmt.Errorf("read the result workbook of envelope %d: %d bytes stored, %d noted when it was built", env.ID, int64(n), env.ResultSize)
	}
	return nil
}

// byteCount counts the bytes written to it.
type byteCount int64

func (n *byteCount) Write(b []byte) (int, error) { *n += byteCount(len(b)); return len(b), nil }
