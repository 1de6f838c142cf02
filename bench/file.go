package bench

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
)

// File describes a synthetic payroll file for the throughput benchmark.
// The same Rows and Offset always give the same natural keys and amounts, so
// files can be regenerated as resubmissions.
type File struct {
	Rows   int // data rows
	Offset int // first employee number, to get keys not used by another file
	// ChangeEvery, when > 0, adds 1.00 to the amount of every row whose
	// index is a multiple of it (100 changes 1% of the rows).
	ChangeEvery int
	// Clean writes every value normalised (1234.50, USD, no spaces), for the
	// baseline COPY; otherwise the formatting is messy the way spreadsheets
	// and payroll exports are: "$1,234.50", "(50.00)", "usd", " Bonus ".
	Clean bool
}

// components are the pay components employees get, in order; the first
// few always, later ones less often.
var components = []string{"BASE", "OVERTIME", "BONUS", "DEDUCTION_401K", "HEALTH_INS",
	"COMMISSION", "TRAVEL_ALLOWANCE", "MEAL_ALLOWANCE"}

// row is one generated row in normalised form.
type genRow struct {
	employee  int
	component string
	cents     int64 // amount in cents, negative for deductions
	hours     string
	rateCents int64 // 0 when there is no rate
}

// rng is a small deterministic generator (SplitMix64): no global state, the
// same sequence on every platform.
type rng uint64

func (r *rng) next() uint64 {
	*r += 0x9E3779B97F4A7C15
	z := uint64(*r)
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

func (r *rng) intn(n int) int { return int(r.next() % uint64(n)) }

// WriteTo writes the file: a header and Rows data rows. Employees get 3 to 8
// components each; every natural key is distinct.
func (b File) WriteTo(w io.Writer) (int64, error) {
	bw := bufio.NewWriterSize(w, 256<<10)
	cw := &countWriter{w: bw}
	if b.Clean {
		fmt.Fprint(cw, cleanHeader+"\n")
	} else {
		fmt.Fprint(cw, "Employee Ref,Pay Period,Component,Amount,Currency,Hours,Rate,Pay Date\r\n")
	}
	var line []byte
	err := b.each(func(row genRow, v int) error {
		// The formatting is drawn for clean files too, so both forms
		// of a file carry the same values.
		line = b.appendRow(line[:0], row, v)
		_, err := cw.Write(line)
		return err
	})
	if err != nil {
		return cw.n, err
	}
	if err := bw.Flush(); err != nil {
		return cw.n, err
	}
	return cw.n, cw.err
}

// cleanHeader is the header of a clean file (and of its workbook).
const cleanHeader = "employee_ref,pay_period,component,amount,currency,hours,rate,pay_date"

// each calls row for the file's rows in order, with v (0..99) drawing
// their messy forms.
func (b File) each(row func(r genRow, v int) error) error {
	i := 0
	for e := b.Offset; i < b.Rows; e++ {
		r := rng(uint64(e)*0x2545F4914F6CDD1D + 1)
		k := 3 + r.intn(6)
		for c := 0; c < k && i < b.Rows; c++ {
			g := genRow{employee: e, component: components[c]}
			base := int64(250000 + r.intn(750000)) // 2,500.00 .. 9,999.99
			switch g.component {
			case "BASE":
				g.cents, g.hours = base, "160"
			case "OVERTIME":
				h := 1 + r.intn(20)
				rate := int64(2500 + r.intn(5000))
				g.hours, g.rateCents = strconv.Itoa(h)+".5", rate
				g.cents = rate * int64(2*h+1) / 2
			case "DEDUCTION_401K", "HEALTH_INS":
				g.cents = -base / 20
			default:
				g.cents = base / 10
			}
			if b.ChangeEvery > 0 && i%b.ChangeEvery == 0 {
				g.cents += 100
			}
			if err := row(g, r.intn(100)); err != nil {
				return err
			}
			i++
		}
	}
	return nil
}

// appendRow writes one row; v (0..99) picks the messy forms.
func (b File) appendRow(dst []byte, row genRow, v int) []byte {
	emp := fmt.Sprintf("E%08d", row.employee)
	if b.Clean {
		dst = append(dst, emp...)
		dst = append(dst, ",2026-03,"...)
		dst = append(dst, row.component...)
		dst = append(dst, ',')
		dst = appendCents(dst, row.cents, false)
		dst = append(dst, ",USD,"...)
		dst = append(dst, row.hours...)
		dst = append(dst, ',')
		if row.rateCents != 0 {
			dst = appendCents(dst, row.rateCents, false)
		}
		return append(dst, ",2026-03-31\n"...)
	}
	// Messy, but valid: the same values in the forms real exports use.
	switch {
	case v < 5:
		emp = " " + emp + " "
	}
	dst = append(dst, emp...)
	dst = append(dst, ',')
	if v%7 == 0 {
		dst = append(dst, " 2026-03 "...)
	} else {
		dst = append(dst, "2026-03"...)
	}
	dst = append(dst, ',')
	comp := row.component
	switch v % 5 {
	case 1:
		comp = lowerASCII(comp)
	case 2:
		comp = " " + comp
	}
	dst = append(dst, comp...)
	dst = append(dst, ',')
	switch {
	case row.cents < 0 && v%2 == 0:
		dst = append(dst, '"', '(')
		dst = appendCents(dst, -row.cents, true)
		dst = append(dst, ')', '"')
	case v%4 == 0:
		dst = append(dst, '"', '$')
		dst = appendCents(dst, row.cents, true)
		dst = append(dst, '"')
	case v%4 == 1:
		dst = append(dst, ' ')
		dst = appendCents(dst, row.cents, false)
		dst = append(dst, ' ')
	default:
		dst = appendCents(dst, row.cents, false)
	}
	switch v % 3 {
	case 0:
		dst = append(dst, ",usd,"...)
	case 1:
		dst = append(dst, ", USD,"...)
	default:
		dst = append(dst, ",USD,"...)
	}
	dst = append(dst, row.hours...)
	dst = append(dst, ',')
	if row.rateCents != 0 {
		dst = appendCents(dst, row.rateCents, false)
	}
	return append(dst, ",2026-03-31\r\n"...)
}

// appendCents writes cents as a decimal with two places, grouped by
// thousands if group is set (then the caller quotes it).
func appendCents(dst []byte, cents int64, group bool) []byte {
	if cents < 0 {
		dst = append(dst, '-')
		cents = -cents
	}
	units := strconv.FormatInt(cents/100, 10)
	if group {
		for i, c := range []byte(units) {
			if i > 0 && (len(units)-i)%3 == 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, c)
		}
	} else {
		dst = append(dst, units...)
	}
	f := cents % 100
	return append(dst, '.', byte('0'+f/10), byte('0'+f%10))
}

func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	if err != nil && c.err == nil {
		c.err = err
	}
	return n, err
}
