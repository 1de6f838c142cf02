package normalize

import (
	"reflect"
	"slices"
	"testing"
)

// The column names the CSV mapping reads (struct tags, which must be
// literals) are FieldNames, in order: the one list of the eight fields.
func TestRawCSVRowTagsAreFieldNames(t *testing.T) {
	typ := reflect.TypeOf(rawCSVRow{})
	var tags []string
	for i := range typ.NumField() {
		tags = append(tags, typ.Field(i).Tag.Get("csv"))
	}
	if !slices.Equal(tags, FieldNames) {
		t.Errorf("rawCSVRow reads columns %q, FieldNames are %q", tags, FieldNames)
	}
	if got := (Record{}).Values(); len(got) != len(FieldNames) {
		t.Errorf("Record.Values gives %d values for %d field names", len(got), len(FieldNames))
	}
}
