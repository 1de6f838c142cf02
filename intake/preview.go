package intake

import (
	"context"
	"errors"
	"io"
	"slices"

	"github.com/payintake/payintake/apply"
	"github.com/payintake/payintake/normalize"
	"github.com/payintake/payintake/records"
)

// Preview is what a file would give if partner sent it now: the columns
// found for each field, and each row's values as read and the outcome it
// would get against today's records. Making it writes nothing.
type Preview struct {
	Partner        string                `json:"partner"`
	ProfileVersion int                   `json:"profile_version,omitempty"` // 0: none stored
	Profile        string                `json:"profile,omitempty"`         // how messages name it; "": no profile
	Columns        []normalize.ColumnUse `json:"columns"`
	Rows           []PreviewRow          `json:"rows"`
	Counts         map[string]int        `json:"counts"`
}

// PreviewRow is one data row of a preview.
type PreviewRow struct {
	Line int `json:"line"`
	Row  int `json:"row"`
	// Values are the row's payintake fields, normalised (the component as
	// the result file echoes it: "BASE (REG)" for a mapped code), or as
	// sent where a field could not be read.
	Values  map[string]string `json:"values"`
	Outcome string            `json:"outcome"`
	Code    string            `json:"code,omitempty"`
	Field   string            `json:"field,omitempty"`
	Message string            `json:"message,omitempty"`
}

// PreviewFile reads body as a file of partner p called fileName would be
// read (its settings and profile: p may carry a profile not stored yet; a
// workbook, .xlsx, on the profile's sheet) and tells what each row would
// get, applying nothing. A file refused whole (a file of more rows than
// the partner's result workbooks hold among them) is returned as the
// *normalize.ParseError its upload would get.
func (in *Intake) PreviewFile(ctx context.Context, p records.Partner, fileName string, body io.Reader) (Preview, error) {
	pv := Preview{Partner: p.ID, Counts: map[string]int{}}
	if p.Profile != nil {
		pv.ProfileVersion = p.Profile.Version
	}
	s := FileSettings(p)
	pv.Profile = s.Profile
	rd, sheet, err := openRows(fileName, body, p)
	if err != nil {
		return pv, err
	}
	if sheet != nil {
		defer sheet.Close()
	}
	pv.Columns = rd.Columns()
	var keys []records.PreviewKey
	var valid []int // index in pv.Rows of each key
	limit := in.Engine.RowLimit(p)
	for {
		row, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return pv, err
		}
		if limit > 0 && row.Index > limit {
			return pv, apply.TooManyRows(row.Line, limit)
		}
		pr := PreviewRow{Line: row.Line, Row: row.Index, Values: map[string]string{
			normalize.FieldEmployeeRef: row.Display.EmployeeRef, normalize.FieldPayPeriod: row.Display.PayPeriod,
			normalize.FieldComponent: row.Display.Component, normalize.FieldAmount: row.Display.Amount,
			normalize.FieldCurrency: row.Display.Currency,
		}}
		if row.Err != nil {
			pr.Outcome, pr.Code, pr.Field, pr.Message = string(records.OutcomeRejected), string(row.Err.Code), row.Err.Field, row.Err.Message
		} else {
			v := row.Record.Values()
			for i, f := range normalize.FieldNames {
				if f != normalize.FieldComponent {
					pr.Values[f] = v[i]
				}
			}
			h := row.Record.Hash()
			keys = append(keys, records.PreviewKey{EmployeeRef: v[0], PayPeriod: v[1], Component: v[2], Hash: h[:], HeldCode: row.Held != nil})
			if row.Held != nil { // held for its component code, unless rejected first
				pr.Field, pr.Message = row.Held.Field, row.Held.Message
			}
			valid = append(valid, len(pv.Rows))
		}
		pv.Rows = append(pv.Rows, pr)
	}
	if len(keys) > 0 {
		outs, err := in.Store.Preview(ctx, p.ID, keys)
		if err != nil {
			return pv, err
		}
		for i, o := range outs {
			r := &pv.Rows[valid[i]]
			r.Outcome, r.Code = string(o.Outcome), string(o.Code)
			if o.Code != normalize.CodeUnknownComponent {
				r.Field, r.Message = "", ""
			}
		}
	}
	// An all-or-nothing file with a rejected row applies none of the others.
	if p.Mode == records.ModeAllOrNothing && slices.ContainsFunc(pv.Rows, func(r PreviewRow) bool { return r.Outcome == string(records.OutcomeRejected) }) {
		for i := range pv.Rows {
			if r := &pv.Rows[i]; r.Outcome != string(records.OutcomeRejected) {
				r.Outcome, r.Code, r.Field, r.Message = string(records.OutcomeRejected), string(normalize.CodeFileRejected), "", ""
			}
		}
	}
	for _, r := range pv.Rows {
		pv.Counts[r.Outcome]++
	}
	return pv, nil
}
