package intake

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/payintake/payintake/normalize"
)

// The members a webhook or a replayed leg takes for a pay line (struct
// tags, which must be literals) are normalize.FieldNames, in order.
func TestPayLineMembersAreFieldNames(t *testing.T) {
	typ := reflect.TypeOf(payLine{})
	var tags []string
	for i := range typ.NumField() {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		tags = append(tags, name)
	}
	if !slices.Equal(tags, normalize.FieldNames) {
		t.Errorf("payLine takes members %q, FieldNames are %q", tags, normalize.FieldNames)
	}
}
