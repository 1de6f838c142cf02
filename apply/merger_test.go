package apply

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

// TestMergerBlock rewrites a block of staging's lines with classified's,
// spooled as storeMerged spools them: a row classified holds takes its
// line, a created one becomes unchanged, a rejected one is kept only for a
// compared resubmission, and a hole must be filled. Anything else is an
// error, never a line passed through.
func TestMergerBlock(t *testing.T) {
	const staged = "2,1,created,E1,2026-11,BASE,1.00,USD,,,\n" +
		"3,2,rejected,E2,2026-11,BASE,abc,USD,invalid_amount,amount,not a number\n" +
		"4,3,?\n" +
		"5,4,created,E4,2026-11,BASE,4.00,USD,,,\n"
	classified := map[int]string{3: "4,3,updated,Zoé,2026-11,BASE,3.00,USD,,,", 4: "5,4,updated,E4,2026-11,BASE,4.00,USD,,,"}
	for name, tc := range map[string]struct {
		compared bool
		rows     []int // classified's rows, in order
		want     string
		err      string
		leftOver int // the classified row left after the block (resultSource refuses it)
	}{
		"compared: hole filled, rejected kept": {
			compared: true, rows: []int{3, 4},
			want: "2,1,unchanged,E1,2026-11,BASE,1.00,USD,,,\n" +
				"3,2,rejected,E2,2026-11,BASE,abc,USD,invalid_amount,amount,not a number\n" +
				classified[3] + "\n" + classified[4] + "\n",
		},
		"compared: a hole classified does not fill": {compared: true, rows: []int{4}, err: "row 3 is neither in classified"},
		"skipped: a rejected row not in classified": {rows: []int{3, 4}, err: "row 2 is neither in classified"},
		"a classified row after the last staged line": {
			compared: true, rows: []int{3, 4, 9}, leftOver: 9,
			want: "2,1,unchanged,E1,2026-11,BASE,1.00,USD,,,\n" +
				"3,2,rejected,E2,2026-11,BASE,abc,USD,invalid_amount,amount,not a number\n" +
				classified[3] + "\n" + classified[4] + "\n",
		},
		"a classified row between staged lines": {compared: true, rows: []int{3, 3}, err: "classified row 3 has no staged line"},
	} {
		t.Run(name, func(t *testing.T) {
			var spool []byte
			for _, row := range tc.rows {
				line := classified[row]
				if line == "" {
					line = "9,9,updated"
				}
				spool = binary.AppendUvarint(spool, uint64(row))
				spool = binary.AppendUvarint(spool, uint64(len(line)))
				spool = append(spool, line...)
			}
			m := &merger{r: bufio.NewReader(bytes.NewReader(spool)), compared: tc.compared}
			m.advance()
			got, err := m.block(nil, []byte(staged))
			if left := map[bool]int{true: m.cur.row}[m.have]; err == nil && left != tc.leftOver {
				t.Errorf("classified row %d left after the block, want %d", left, tc.leftOver)
			}
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want one naming %q", err, tc.err)
			case tc.err == "" && string(got) != tc.want:
				t.Errorf("merged:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}
