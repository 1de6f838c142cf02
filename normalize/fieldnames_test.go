package normalize

import "testing"

// A record's values are given in the order of FieldNames, one each.
func TestRecordValuesAreFieldNames(t *testing.T) {
	if n := len((Record{}).Values()); n != len(FieldNames) {
		t.Errorf("Record.Values gives %d values for %d field names", n, len(FieldNames))
	}
}
