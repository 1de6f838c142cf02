package records

// StagedRow is one data row of a file, normalised (or rejected), ready to be
// staged. Valid rows carry normalised values and a content hash; rejected
// rows carry Code, Field and Message. D* values are what the result file
// echoes when they differ from the normalised ones (raw values of a rejected
// row, formula-escaped values); empty means "the normalised value".
type StagedRow struct {
	Row, Line                                                int
	EmployeeRef, PayPeriod, Component, Amount, Currency      string
	Hours, Rate, PayDate                                     string
	Hash                                                     []byte
	DEmployeeRef, DPayPeriod, DComponent, DAmount, DCurrency string
	Code, Field, Message                                     string
}
