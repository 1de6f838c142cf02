package records

// StagedRow is one data row of a file, normalised (or rejected), ready to be
// staged. Valid rows carry normalised values and a content hash; rejected
// rows carry Code, Field and Message. A valid row with a Field is held for
// a reviewer whatever the records say (HeldCode): Field and Message say why,
// and the code is the store's (unknown_component). D* values are what the
// result file echoes when they differ from the normalised ones (raw values
// of a rejected row, formula-escaped values); empty means "the normalised
// value".
type StagedRow struct {
	Row, Line                                                int
	EmployeeRef, PayPeriod, Component, Amount, Currency      string
	Hours, Rate, PayDate                                     string
	Hash                                                     []byte
	DEmployeeRef, DPayPeriod, DComponent, DAmount, DCurrency string
	Code, Field, Message                                     string
}

// HeldCode reports whether r is a valid row held for its component code:
// a code the partner's profile does not map, under unknown_component: hold
// (its Component is the code). Processing holds it (code
// unknown_component) for a reviewer, who says what component the code means.
func (r *StagedRow) HeldCode() bool { return r.Code == "" && r.Field != "" }
