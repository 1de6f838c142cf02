package apply

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

// TestMergerBlock rewrites a block of staging's lines with classified's
// decisions, spooled as storeMerged spools them: a created row classified
// holds takes its outcome, code, field and message after its own echoed
// cells, a created one it does not hold becomes unchanged, a rejected one
// is kept as staged, but must be in classified unless the file was
// compared. Anything else is an error, never a line passed through.
func TestMergerBlock(t *testing.T) {
	const staged = "2,1,created,E1,2026-11,BASE,1.00,USD,,,\n" +
		"3,2,rejected,E2,2026-11,BASE,abc,USD,invalid_amount,amount,not a number\n" +
		"4,3,created,\"Zoé \",2026-11,BASE,3.00,USD,,,\n" +
		"5,4,created,E4,2026-11,BASE,4.00,USD,,,\n"
	type decision struct{ outcome, tail string }
	classified := map[int]decision{
		2: {"rejected", "invalid_amount,amount,not a number"},
		3: {"held", `record_locked,,"this record is locked (approved), so ..."`},
		4: {"updated", ",,"},
	}
	const row3 = "4,3,held,\"Zoé \",2026-11,BASE,3.00,USD,record_locked,,\"this record is locked (approved), so ...\"\n"
	for name, tc := range map[string]struct {
		compared bool
		rows     []int // classified's rows, in order
		want     string
		err      string
		leftOver int // the classified row left after the block (resultSource refuses it)
	}{
		"compared: rejected kept, changed rows decided": {
			compared: true, rows: []int{3, 4},
			want: "2,1,unchanged,E1,2026-11,BASE,1.00,USD,,,\n" +
				"3,2,rejected,E2,2026-11,BASE,abc,USD,invalid_amount,amount,not a number\n" +
				row3 + "5,4,updated,E4,2026-11,BASE,4.00,USD,,,\n",
		},
		"classified: rejected row in classified": {
			rows: []int{2, 3},
			want: "2,1,unchanged,E1,2026-11,BASE,1.00,USD,,,\n" +
				"3,2,rejected,E2,2026-11,BASE,abc,USD,invalid_amount,amount,not a number\n" +
				row3 + "5,4,unchanged,E4,2026-11,BASE,4.00,USD,,,\n",
		},
		"classified: a rejected row not in classified": {rows: []int{3, 4}, err: "row 2 is neither in classified"},
		"a classified row after the last staged line": {
			compared: true, rows: []int{3, 4, 9}, leftOver: 9,
			want: "2,1,unchanged,E1,2026-11,BASE,1.00,USD,,,\n" +
				"3,2,rejected,E2,2026-11,BASE,abc,USD,invalid_amount,amount,not a number\n" +
				row3 + "5,4,updated,E4,2026-11,BASE,4.00,USD,,,\n",
		},
		"a classified row between staged lines": {compared: true, rows: []int{3, 3}, err: "classified row 3 has no staged line"},
	} {
		t.Run(name, func(t *testing.T) {
			var spool []byte
			for _, row := range tc.rows {
				d, ok := classified[row]
				if !ok {
					d = decision{"updated", ",,"}
				}
				spool = binary.AppendUvarint(spool, uint64(row))
				spool = binary.AppendUvarint(spool, uint64(len(d.outcome)))
				spool = binary.AppendUvarint(spool, uint64(len(d.tail)))
				spool = append(append(spool, d.outcome...), d.tail...)
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
