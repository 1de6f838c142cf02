package workbook

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/xuri/excelize/v2"

	"github.com/payintake/payintake/normalize"
)

// TestSheetSpillReachesExcelize: the stream writer's sheet buffer is
// reached (its layout is streamBuffer's in this excelize), a spill moves
// what it holds to a temporary file, and the workbook written is the one
// written without the spill. An excelize whose buffer changed fails here
// rather than build result workbooks in three times the memory.
func TestSheetSpillReachesExcelize(t *testing.T) {
	book := func(spill bool) []byte {
		t.Helper()
		f := excelize.NewFile(excelize.Options{TmpDir: t.TempDir()})
		defer f.Close()
		sw, err := f.NewStreamWriter("Sheet1")
		if err != nil {
			t.Fatal(err)
		}
		s := streamBufferOf(sw)
		if s == nil {
			t.Fatal("excelize's StreamWriter.rawData is not laid out as streamBuffer: check stream.go's bufferedWriter and update streamBuffer")
		}
		for n := 1; n <= 3; n++ {
			if err := sw.SetRow(fmt.Sprintf("A%d", n), []any{"row", n}); err != nil {
				t.Fatal(err)
			}
			if !spill {
				continue
			}
			if err := s.spill(1); err != nil {
				t.Fatal(err)
			}
			if s.tmp == nil || s.buf.Len() != 0 {
				t.Fatalf("after a spill: temporary file %v, %d bytes still buffered", s.tmp, s.buf.Len())
			}
		}
		if err := sw.Flush(); err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := Save(f, &b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	if a, b := book(false), book(true); !bytes.Equal(a, b) || len(a) == 0 {
		t.Fatalf("a workbook spilled row by row: %d bytes, not the %d written without a spill", len(b), len(a))
	}
}

// TestSpilledResultWorkbookIsTheSame: a result of 20,000 rows (about 6 MB
// of sheet XML) gives the same bytes spilled every 4 KiB, at
// sheetSpillSize, and at excelize's own 16 MiB (never, here).
func TestSpilledResultWorkbookIsTheSame(t *testing.T) {
	var csv strings.Builder
	csv.WriteString(normalize.ResultHeader)
	for i := 1; i <= 20000; i++ {
		switch i % 10 {
		case 3:
			fmt.Fprintf(&csv, "%d,%d,rejected,%05d,2026-11,BONUS,12.345,USD,too_many_decimals,amount,\"amount \"\"12.345\"\" has more decimals than USD allows\"\n", i+1, i, i)
		case 7:
			fmt.Fprintf(&csv, "%d,%d,held,E%d,2026-11,BASE,%d.10,EUR,period_locked,,the pay period is closed\n", i+1, i, i, i)
		default:
			fmt.Fprintf(&csv, "%d,%d,created,%05d,2026-11,BASE,%d.%02d,USD,,,\n", i+1, i, i, 1000+i, i%100)
		}
	}
	build := func(spill int) []byte {
		t.Helper()
		var b bytes.Buffer
		if err := resultWorkbook(&b, strings.NewReader(csv.String()), t.TempDir(), spill); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	unspilled := build(0)
	for _, spill := range []int{4 << 10, sheetSpillSize} {
		if got := build(spill); !bytes.Equal(got, unspilled) {
			t.Errorf("spilled from %d bytes: %d bytes, not the %d of the workbook spilled at 16 MiB", spill, len(got), len(unspilled))
		}
	}
}
